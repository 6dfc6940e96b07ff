#!/usr/bin/env bash
# The figures of docs/PERFORMANCE.md's PyTorch section, in one job script: collx against gloo from
# Python (torch/benchmarks/bench.py, both backends interleaved in one mpirun) at np=2 and np=4,
# then, right after at the same rank count, collx's own allreduce and allgather from C++
# (collx-bench's auto rows) beside the MPI library's MPI_Allreduce and MPI_Allgather (mpi rows).
#
#   torch/benchmarks/run.sh OUTDIR [NP...]   (after a build; NP: 2 4 unless given; writes
#                                             OUTDIR/*.txt and *.json)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
collx_mpi_env
out="${1:?usage: run.sh OUTDIR [NP...]}"
shift
ranks=("${@:-2}")
[ $# -gt 0 ] || ranks=(2 4)
mkdir -p "$out"
{
  lscpu | grep -m1 "Model name"
  echo "cores: $(nproc)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  date -u
} | tee -a "$out/machine.txt"
for np in "${ranks[@]}"; do
  # More ranks than cores: Open MPI's waiting ranks yield the core instead of spinning on it.
  if [ "$np" -gt "$(nproc)" ]; then
    export OMPI_MCA_mpi_yield_when_idle=1
  else
    unset OMPI_MCA_mpi_yield_when_idle
  fi
  PYTHONPATH="$BUILD_DIR/torch" mpirun -np "$np" --oversubscribe "$COLLX_TORCH_VENV/bin/python" \
    "$COLLX_ROOT/torch/benchmarks/bench.py" --runs 3 --ddp 10 --json "$out/torch_np$np.json" \
    | tee "$out/torch_np$np.txt"
  mpirun -np "$np" --oversubscribe "$BUILD_DIR/apps/bench/collx-bench" allreduce -b 16 -e 64M -f 4 \
    -d float32 -o sum -a auto,mpi -n 20 -w 5 -c 1 --json "$out/collx_bench_np$np.json" \
    | tee "$out/collx_bench_np$np.txt"
  # all_gather's list form at the sizes of the bandwidth goal: collx's own allgather from C++
  # (its auto row; size = the whole output, as in bench.py), MPI_Allgather, and one local copy of
  # the output (memcpy: what the list form's copy out of a flat result would cost).
  mpirun -np "$np" --oversubscribe "$BUILD_DIR/apps/bench/collx-bench" allgather -b 1M -e 64M -f 4 \
    -d float32 -a auto,mpi,memcpy -n 20 -w 5 -c 1 --json "$out/collx_bench_allgather_np$np.json" \
    | tee "$out/collx_bench_allgather_np$np.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"

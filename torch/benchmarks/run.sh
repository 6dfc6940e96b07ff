#!/usr/bin/env bash
# The figures of docs/PERFORMANCE.md's PyTorch section, in one job script: collx against gloo from
# Python (torch/benchmarks/bench.py, both backends interleaved in one mpirun) at np=2 and np=4,
# then, right after at the same rank count, collx's own allreduce from C++ (collx-bench's auto
# row) beside the MPI library's MPI_Allreduce (its mpi row).
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
  PYTHONPATH="$BUILD_DIR/torch" mpirun -np "$np" --oversubscribe /usr/bin/python3 \
    "$COLLX_ROOT/torch/benchmarks/bench.py" --runs 3 --ddp 10 --json "$out/torch_np$np.json" \
    | tee "$out/torch_np$np.txt"
  mpirun -np "$np" --oversubscribe "$BUILD_DIR/apps/bench/collx-bench" allreduce -b 16 -e 64M -f 4 \
    -d float32 -o sum -a auto,mpi -n 20 -w 5 -c 1 --json "$out/collx_bench_np$np.json" \
    | tee "$out/collx_bench_np$np.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"

#!/usr/bin/env bash
# The Intel MPI Benchmarks (IMB-MPI1, unmodified) through the drop-in: each benchmark's t_avg
# with the MPI library alone and with libcollx_mpi preloaded, alternately in one job, RUNS
# times at each rank count, and the MPI library alone once more after each (native_again: the
# noise between two identical runs); then one table per benchmark and rank count (the median of
# each side's times, and the median of the per-run ratios native / drop-in: above 1, the
# drop-in is faster; and native / native_again). IMB is built outside this tree from its public source (README, "Performance"):
#
#   git clone https://github.com/intel/mpi-benchmarks && cd mpi-benchmarks &&
#     make IMB-MPI1 CC=mpicc CXX=mpicxx CXXFLAGS=-DOMPI_SKIP_MPICXX
#
#   IMB=/path/to/IMB-MPI1 scripts/imb-dropin.sh OUTDIR [RUNS=3] [NPS="2 4"] [MSGLOG=3:24]
#
# COLLX_MPI picks the MPI (scripts/common.sh); the IMB binary must be built against the same.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
out="${1:?usage: IMB=... imb-dropin.sh OUTDIR [RUNS] [NPS] [MSGLOG]}"
runs="${2:-3}"
nps="${3:-2 4}"
msglog="${4:-3:24}"
imb="${IMB:?set IMB to the IMB-MPI1 binary}"
library="$BUILD_DIR/dropin/libcollx_mpi.so"
[ -f "$library" ] || { echo "imb-dropin: build first ($library)" >&2; exit 1; }
benchmarks=(Allreduce Bcast Reduce Allgather Reduce_scatter_block Alltoall Barrier)
mkdir -p "$out"
{
  echo "IMB-MPI1 through libcollx_mpi: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$COLLX_ROOT" log --oneline -1 | cut -c1-7)"
  echo "machine: $(lscpu | grep -E '^CPU\(s\)|Model name' | sed 's/  */ /g' | tr '\n' ' ')"
  echo "load before: $(uptime)"
  "$COLLX_MPIEXEC" --version 2>&1 | sed -n 1p  # not head: see auto-vs-mpi.sh
} >"$out/machine.txt"
for r in $(seq 1 "$runs"); do
  for np in $nps; do
    # native_again: the MPI library alone once more, the noise between two identical runs.
    for side in native dropin native_again; do
      pre=()
      [ "$side" = dropin ] && pre=(env LD_PRELOAD="$library")
      collx_mpirun "$np" "${pre[@]}" "$imb" -npmin "$np" -msglog "$msglog" -zero_size off -time 2 -mem 2 \
        "${benchmarks[@]}" >"$out/${side}_np${np}_r${r}.txt" 2>&1
    done
  done
done
echo "load after: $(uptime)" >>"$out/machine.txt"
python3 "$COLLX_ROOT/scripts/imb_table.py" "$out" >"$out/table.md"
echo "imb-dropin: $out/table.md"

#!/usr/bin/env bash
# docs/PERFORMANCE.md's MPICH table (issue 14): auto against MPICH's own collective, every
# collective, np 2 and 4, every size from 8 B to 64 MiB by factors of 2, the median of RUNS runs
# (scripts/perf-sweep.sh over collx-bench -a auto,mpi). Builds collx-bench against MPICH first
# (BUILD_DIR, default build-mpich: shared, no CUDA, no torch) when it is missing.
#
#   scripts/mpich-table.sh OUTDIR [RUNS=5] [NPS="2 4"] [COLLECTIVES...]
#
# Two sweeps: 8 B-64 KiB with many iterations (sub-microsecond to tens of microseconds) and
# 128 KiB-64 MiB with few, with the memcpy row (the machine's copy bandwidth). Run it on a quiet
# machine; the tables go to OUTDIR/table.md with the load average, the CPU and the command
# lines they came from.
set -euo pipefail
export COLLX_MPI=mpich
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: mpich-table.sh OUTDIR [RUNS] [NPS] [COLLECTIVES...]}"
runs="${2:-5}"
nps="${3:-2 4}"
shift $(($# < 3 ? $# : 3))
collectives=("$@")
[ ${#collectives[@]} -eq 0 ] &&
  collectives=(allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall barrier)

bench="$BUILD_DIR/apps/bench/collx-bench"
if [ ! -x "$bench" ]; then
  collx_configure -DCOLLX_CUDA=OFF -DCOLLX_TORCH=OFF
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target collx-bench
fi
mkdir -p "$out"
table="$out/table.md"
{
  echo "MPICH table: $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | grep 'Model name' | sed 's/  */ /g')"
  echo "load before: $(uptime)"
  version="$("$COLLX_MPIEXEC" --version 2>&1)"
  head -n 2 <<<"$version"
} >"$table"
SWEEP_ALGOS=auto,mpi SWEEP_ITERS="${MPICH_TABLE_SMALL_ITERS:--n 1000 -w 100}" "$COLLX_ROOT/scripts/perf-sweep.sh" \
  "$out/small" "$runs" "$nps" "${collectives[@]}" -- -b 8 -e 64K -f 2 >>"$table"
sized=()  # barrier has no size: the first sweep has it
for c in "${collectives[@]}"; do
  [ "$c" = barrier ] || sized+=("$c")
done
if [ ${#sized[@]} -gt 0 ]; then
  SWEEP_ALGOS=auto,mpi,memcpy SWEEP_ITERS="${MPICH_TABLE_LARGE_ITERS:--n 20 -w 5}" "$COLLX_ROOT/scripts/perf-sweep.sh" \
    "$out/large" "$runs" "$nps" "${sized[@]}" -- -b 128K -e 64M -f 2 >>"$table"
fi
echo "load after: $(uptime)" >>"$table"
echo "mpich-table: $table"

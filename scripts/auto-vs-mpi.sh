#!/usr/bin/env bash
# Issue 40's table: auto against the MPI library's own collective (collx-bench -a auto,mpi, and
# mpi_again: the same call again, the noise between two identical rows),
# every collective, at each rank count of NPS, every size from 8 B to 64 MiB by factors of 2
# (AUTO_VS_MPI_FACTOR: another factor),
# RUNS interleaved runs (scripts/perf-sweep.sh: the median of the runs' times and of their
# per-run ratios), hot and, with MODE=cold, --cold (every call on buffers the caches do not
# hold). No tuning file: auto's trials (the MPI library's collective among the candidates) run
# before the timed calls, as a new user's first calls would (collx-bench goes on past the
# warm-up until they end: at most 5 candidates x 8 calls to 64 KiB, x 6 to 16 MiB, x 3 above);
# their cost is reported apart (first_calls, first_calls_us in the JSON files). The MPI: COLLX_MPI (openmpi or
# mpich; scripts/common.sh), its build folder built first where collx-bench is missing.
#
#   scripts/auto-vs-mpi.sh OUTDIR [RUNS=3] [NPS="2 4"] [MODE=hot] [COLLECTIVES...]
#
# Writes OUTDIR/table.md (the load, the CPU, the MPI's version, the commands and the tables).
# Run it on a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: auto-vs-mpi.sh OUTDIR [RUNS] [NPS] [MODE] [COLLECTIVES...]}"
runs="${2:-3}"
nps="${3:-2 4}"
mode="${4:-hot}"
shift $(($# < 4 ? $# : 4))
collectives=("$@")
[ ${#collectives[@]} -eq 0 ] &&
  collectives=(allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall barrier)
cold=()
# mpi_again: the MPI library's call again as a row of its own, the noise a cell is read against
# (auto_vs_mpi_csv.py: mpi_over_again).
algos="${AUTO_VS_MPI_ALGOS:-auto,mpi,mpi_again}"
[ "$mode" = cold ] && cold=(--cold)

bench="$BUILD_DIR/apps/bench/collx-bench"
if [ ! -x "$bench" ]; then
  collx_configure -DCOLLX_CUDA=OFF -DCOLLX_TORCH=OFF
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target collx-bench
fi
mkdir -p "$out"
table="$out/table.md"
{
  echo "auto against $COLLX_MPI ($mode): $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$COLLX_ROOT" log --oneline -1 | cut -c1-7)"
  echo "machine: $(lscpu | grep -E '^CPU\(s\)|Model name' | sed 's/  */ /g' | tr '\n' ' ')"
  echo "memcpy: $(collx_mpirun 1 "$bench" allreduce -b 64M -e 64M -a memcpy -n 10 -w 2 | grep ' memcpy' | sed 's/  */ /g')"
  echo "load before: $(uptime)"
  # sed reads to the end: head would close the pipe early, and pipefail end the script (hydra prints many lines)
  "$COLLX_MPIEXEC" --version 2>&1 | sed -n 1,2p
} >"$table"
SWEEP_ALGOS="$algos" SWEEP_ITERS="${AUTO_VS_MPI_SMALL_ITERS:--n 1000 -w 100}" \
  "$COLLX_ROOT/scripts/perf-sweep.sh" "$out/small" "$runs" "$nps" "${collectives[@]}" -- \
  -b 8 -e 64K -f "${AUTO_VS_MPI_FACTOR:-2}" "${cold[@]}" >>"$table"
sized=()  # barrier has no size: the first sweep has it
for c in "${collectives[@]}"; do
  [ "$c" = barrier ] || sized+=("$c")
done
if [ ${#sized[@]} -gt 0 ]; then
  SWEEP_ALGOS="$algos" SWEEP_ITERS="${AUTO_VS_MPI_LARGE_ITERS:--n 20 -w 32}" \
    "$COLLX_ROOT/scripts/perf-sweep.sh" "$out/large" "$runs" "$nps" "${sized[@]}" -- \
    -b 128K -e 64M -f "${AUTO_VS_MPI_FACTOR:-2}" "${cold[@]}" >>"$table"
fi
echo "load after: $(uptime)" >>"$table"
echo "auto-vs-mpi: $table"

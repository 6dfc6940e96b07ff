#!/usr/bin/env bash
# Issue 16's goal table (docs/PERFORMANCE.md, "One node, two ranks: auto against Open MPI"): auto
# against the MPI library's own collective and the memcpy row, alone in the run (-a
# auto,mpi,memcpy), np=2 for allreduce, reduce_scatter, allgather, broadcast and reduce, hot and
# --cold, RUNS interleaved runs of each (perf-sweep.sh), 8 B-128 KiB with many iterations and 1-64
# MiB with few; then np=4 allreduce from 1 MiB (oversubscribed: Open MPI's ranks yield). No tuning
# file: auto's trials run in each run's warm-up, as a new user's first calls would, and the JSON
# keeps their cost (first_calls).
#
#   scripts/goal-sweep.sh OUTDIR [RUNS=5]
#
# Writes OUTDIR/hot.md, OUTDIR/cold.md and OUTDIR/np4.md (scripts/goal_table.py's tables, with
# the per-run ratios) and OUTDIR/machine.txt. Run it on a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: goal-sweep.sh OUTDIR [RUNS]}"
runs="${2:-5}"
collectives=(allreduce reduce_scatter allgather broadcast reduce)
sweep="$COLLX_ROOT/scripts/perf-sweep.sh"
mkdir -p "$out"
{
  date -u '+%Y-%m-%d %H:%M UTC'
  git -C "$COLLX_ROOT" log --oneline -1
  lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3' | sed 's/  */ /g'
  uptime
  # One core's copy of 64 MiB: the memory-bandwidth limit the x_memcpy columns divide by.
  collx_mpirun 1 "$BUILD_DIR/apps/bench/collx-bench" allreduce -b 64M -e 64M -a memcpy -n 20 -w 3 |
    grep ' memcpy'
} >"$out/machine.txt"
for mode in hot cold; do
  cold=()
  [ "$mode" = cold ] && cold=(--cold)
  SWEEP_ALGOS=auto,mpi,memcpy SWEEP_ITERS="-n 1000 -w 100" "$sweep" "$out/$mode-small" "$runs" 2 \
    "${collectives[@]}" -- -b 8 -e 128K -f 4 "${cold[@]}" >/dev/null
  SWEEP_ALGOS=auto,mpi,memcpy SWEEP_ITERS="-n 20 -w 5" "$sweep" "$out/$mode-large" "$runs" 2 \
    "${collectives[@]}" -- -b 1M -e 64M -f 2 "${cold[@]}" >/dev/null
  python3 "$COLLX_ROOT/scripts/goal_table.py" "$out/$mode-small,$out/$mode-large" \
    allreduce:2:1M:64M:2.0:memcpy allreduce:2:1M:64M:1.5 allreduce:2:8:128K:1.0 \
    reduce_scatter:2:1M:64M:1.2 reduce_scatter:2:8:128K:1.0 \
    allgather:2:1M:64M:1.2 allgather:2:8:128K:1.0 \
    broadcast:2:1M:64M:1.2 broadcast:2:8:128K:1.0 \
    reduce:2:1M:64M:1.2 reduce:2:8:128K:1.0 >"$out/$mode.md"
done
OMPI_MCA_mpi_yield_when_idle=1 SWEEP_ALGOS=auto,mpi,memcpy SWEEP_ITERS="-n 10 -w 3" "$sweep" \
  "$out/np4" "$runs" 4 allreduce -- -b 1M -e 64M -f 2 >/dev/null
python3 "$COLLX_ROOT/scripts/goal_table.py" "$out/np4" allreduce:4:1M:64M:1.3 >"$out/np4.md"
echo "goal-sweep: tables in $out/hot.md, $out/cold.md, $out/np4.md"

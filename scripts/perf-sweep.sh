#!/usr/bin/env bash
# Runs collx-bench over every algorithm and the mpi row, several times, for each collective and
# rank count, keeping the --json output; then prints one markdown table per collective and
# rank count (median time over the runs, median of the per-run ratios to the mpi row).
#
#   scripts/perf-sweep.sh OUTDIR [RUNS=5] [NPS="2 4"] [COLLECTIVES...] -- [collx-bench options]
#
# Example (what docs/PERFORMANCE.md records):
#   scripts/perf-sweep.sh /tmp/sweep 5 "2 4" broadcast reduce allgather -- -b 8 -e 64M -f 4
# SWEEP_ALGOS=auto,mpi runs those algorithms instead of all of them (the goal tables);
# SWEEP_ITERS="-n 2000 -w 100" replaces the default "-n 20 -w 5" (sub-microsecond sizes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: perf-sweep.sh OUTDIR [RUNS] [NPS] [COLLECTIVES...] -- [bench options]}"
shift
runs="${1:-5}"
[ $# -gt 0 ] && shift
nps="${1:-2 4}"
[ $# -gt 0 ] && shift
collectives=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  collectives+=("$1")
  shift
done
[ $# -gt 0 ] && shift
bench_options=("$@")
algos="${SWEEP_ALGOS:-all}"
read -r -a iters <<<"${SWEEP_ITERS:--n 20 -w 5}"
[ ${#bench_options[@]} -eq 0 ] && bench_options=(-b 8 -e 64M -f 4)
[ ${#collectives[@]} -eq 0 ] &&
  collectives=(allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall sendrecv barrier)

bench="$BUILD_DIR/apps/bench/collx-bench"
[ -x "$bench" ] || { echo "perf-sweep: build first ($bench is missing)" >&2; exit 1; }
mkdir -p "$out"
# Run r of every collective and rank count before run r+1 of any: each configuration's runs are
# spread over the whole sweep, so a slow spell of the machine does not take all of them.
for r in $(seq 1 "$runs"); do
  for c in "${collectives[@]}"; do
    for np in $nps; do
      json="$out/${c}_np${np}_r${r}.json"
      collx_mpirun "$np" "$bench" "$c" -a "$algos" "${iters[@]}" -c 1 \
        "${bench_options[@]}" --json "$json" >"$out/${c}_np${np}_r${r}.txt"
      grep -q "Out of bounds values : 0 OK" "$out/${c}_np${np}_r${r}.txt" ||
        { echo "perf-sweep: wrong results in $out/${c}_np${np}_r${r}.txt" >&2; exit 1; }
    done
  done
done
for c in "${collectives[@]}"; do
  for np in $nps; do
    files=()
    for r in $(seq 1 "$runs"); do
      files+=("$out/${c}_np${np}_r${r}.json")
    done
    echo
    echo "### $c, np=$np"
    echo
    echo "\`$(basename "$COLLX_MPIEXEC") -n $np ${COLLX_MPIEXEC_FLAGS[*]} collx-bench $c -a $algos ${iters[*]} -c 1 ${bench_options[*]}\`," \
      "$runs runs; times in us (median), ratios = mpi time / collx time (median of the per-run ratios)."
    echo
    python3 "$COLLX_ROOT/scripts/bench_summary.py" --markdown "${files[@]}" | tail -n +2
  done
done

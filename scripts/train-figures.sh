#!/usr/bin/env bash
# The figures of docs/TRAINING.md: every command RUNS times (default 3), np=1 and np=2
# interleaved so that both see the same background load; scripts/train_summary.py prints the
# medians (and the load average each command started under, from OUT_DIR/loadavg.txt).
#
#   scripts/train-figures.sh [RUNS] [OUT_DIR]
#
# Needs a Release build in $COLLX_BUILD_DIR (default build/) and dataset-fashion-mnist.
# 1. accuracy and wall time of the default run at np=2 (`mpirun -np 2 collx-train`);
# 2. samples/s at np=1 and np=2 at the same (default) global batch, 3 epochs each;
# 3. exposed communication and the time split without overlap (--no-overlap), np=2, 3 epochs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
runs=${1:-3}
out=${2:-train-figures}
mkdir -p "$out"
rm -f "$out"/*.json "$out/loadavg.txt"
train="$BUILD_DIR/apps/train/collx-train"

# run NAME NP ARGS...: one collx-train run logged to OUT_DIR/NAME_rR.json
run() {
  local name=$1 np=$2
  shift 2
  echo "$name r$r $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/loadavg.txt"
  echo "+ $COLLX_MPIEXEC -n $np ${COLLX_MPIEXEC_FLAGS[*]} $train --no-progress $* --log-json $out/${name}_r$r.json"
  collx_mpirun "$np" "$train" --no-progress "$@" --log-json "$out/${name}_r$r.json" </dev/null
}

for ((r = 1; r <= runs; r++)); do
  echo "== run $r of $runs"
  run default_np2 2
  run scaling_np1 1 --epochs 3
  run scaling_np2 2 --epochs 3
  run nooverlap_np2 2 --epochs 3 --no-overlap
done
python3 "$(dirname "${BASH_SOURCE[0]}")/train_summary.py" "$out"

#!/usr/bin/env bash
# The drop-in row of docs/PERFORMANCE.md: an unmodified MPI_Allreduce loop
# (tests/dropin/allreduce_loop.c) timed with the MPI library alone and with libcollx_mpi
# preloaded, alternately, RUNS times each, in one job.
#
#   scripts/dropin-bench.sh [RUNS=3] [NP=2] [ITERATIONS=20]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
runs="${1:-3}" np="${2:-2}" iterations="${3:-20}"
loop="$BUILD_DIR/tests/dropin/allreduce_loop"
library="$BUILD_DIR/dropin/libcollx_mpi.so"
if [ ! -x "$loop" ] || [ ! -f "$library" ]; then
  echo "dropin-bench: build first ($loop, $library)" >&2
  exit 1
fi
for r in $(seq 1 "$runs"); do
  echo "== run $r: MPI alone"
  collx_mpirun "$np" "$loop" "$iterations"
  echo "== run $r: with libcollx_mpi (LD_PRELOAD)"
  collx_mpirun "$np" env LD_PRELOAD="$library" "$loop" "$iterations"
done

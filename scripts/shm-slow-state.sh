#!/usr/bin/env bash
# Provokes and shows the shared-memory path's slow state on a 2-core VM (docs/PERFORMANCE.md, "Why
# the arena, and the VM's slow state"): each round runs a heavy oversubscribed np=4 reduce sweep,
# then times the np=2 allgather and broadcast through shared memory with plain stores into the rings
# (COLLX_SHM_STORES=plain, no direct reads) and as auto runs them, beside MPI's. In the slow state
# the plain rows are 3-15x slower than in the fast one while the mpi row is not; the auto rows
# switch to streaming stores or direct reads.
#
#   scripts/shm-slow-state.sh [ROUNDS=6]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
bench="$BUILD_DIR/apps/bench/collx-bench"
[ -x "$bench" ] || { echo "shm-slow-state: build first ($bench is missing)" >&2; exit 1; }
rounds="${1:-6}"
times() {  # times COLLECTIVE [VAR=VALUE...]: the time(us) column of every row, in order
  local collective=$1
  shift
  env "$@" "$COLLX_MPIEXEC" -n 2 "$bench" "$collective" -b 1M -e 4M -f 4 -a shared_memory,mpi -n 20 -w 3 \
    -c 1 | awk '/^ +[0-9]/ {printf "%s %s us  ", $6, $7}'
}
plain=(COLLX_SHM_STORES=plain COLLX_SHM_DIRECT=0)
for r in $(seq 1 "$rounds"); do
  collx_mpirun 4 "$bench" reduce -b 1M -e 64M -f 4 -a all -n 10 -w 2 -c 0 >/dev/null
  echo "round $r  allgather 1M,4M plain: $(times allgather "${plain[@]}")"
  echo "round $r  allgather 1M,4M auto:  $(times allgather)"
  echo "round $r  broadcast 1M,4M plain: $(times broadcast "${plain[@]}")"
  echo "round $r  broadcast 1M,4M auto:  $(times broadcast)"
done

#!/usr/bin/env bash
# Provokes and shows the shared-memory path's slow state on a 2-core VM (docs/PERFORMANCE.md,
# "Shared memory", "The slow state (open)"): each round runs a heavy oversubscribed np=4 reduce
# sweep, then times the np=2 allgather and broadcast through shared memory beside MPI's. In the
# slow state shared_memory is 3-15x slower than in the fast one while the mpi row is not.
#
#   scripts/shm-slow-state.sh [ROUNDS=6]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
export OMPI_MCA_op=^avx
bench="$BUILD_DIR/apps/bench/collx-bench"
[ -x "$bench" ] || { echo "shm-slow-state: build first ($bench is missing)" >&2; exit 1; }
rounds="${1:-6}"
times() {  # the time(us) column of every row, in order
  mpirun -np 2 "$bench" "$1" -b 1M -e 4M -f 4 -a shared_memory,mpi -n 20 -w 3 -c 1 |
    awk '/^ +[0-9]/ {printf "%s %s us  ", $6, $7}'
}
for r in $(seq 1 "$rounds"); do
  mpirun -np 4 --oversubscribe "$bench" reduce -b 1M -e 64M -f 4 -a all -n 10 -w 2 -c 0 >/dev/null
  echo "round $r  allgather 1M,4M: $(times allgather)"
  echo "round $r  broadcast 1M,4M: $(times broadcast)"
done

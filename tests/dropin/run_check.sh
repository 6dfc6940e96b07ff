#!/usr/bin/env bash
# Runs an MPI command with COLLX_PMPI_STATS=1 and checks what libcollx_mpi reported at
# MPI_Finalize, one line per rank:
#   run_check.sh intercepted NP COMMAND...  every rank intercepted calls (and the command passed)
#   run_check.sh passed NP COMMAND...       every rank intercepted none (COLLX_PMPI=0)
set -uo pipefail
expect="$1" np="$2"
shift 2
output="$(COLLX_PMPI_STATS=1 "$@" 2>&1)"
status=$?
echo "$output"
[ $status -eq 0 ] || { echo "run_check: the command failed ($status)"; exit 1; }
stats="$(grep -c "^collx_mpi rank [0-9]*: intercepted" <<<"$output")"
[ "$stats" -eq "$np" ] || { echo "run_check: $stats statistics lines for $np ranks"; exit 1; }
zero="$(grep -c "^collx_mpi rank [0-9]*: intercepted 0," <<<"$output")"
case "$expect" in
  intercepted) [ "$zero" -eq 0 ] || { echo "run_check: $zero ranks intercepted nothing"; exit 1; } ;;
  passed) [ "$zero" -eq "$np" ] || { echo "run_check: calls were intercepted"; exit 1; } ;;
  *) echo "run_check: expect intercepted or passed"; exit 2 ;;
esac
echo "run_check: OK ($expect on $np ranks)"

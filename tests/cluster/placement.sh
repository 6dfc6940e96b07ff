#!/usr/bin/env bash
# placement.sh EMULATED-CLUSTER LAYOUT EXPECTED: runs `hostname` on every rank of LAYOUT (NxR)
# and checks "rank host" pairs, sorted and joined by spaces, against EXPECTED.
set -euo pipefail
status=0
# shellcheck disable=SC2016  # expanded by each rank's shell
out="$("$1" run "$2" -- sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"')" || status=$?
[ "$status" -eq 0 ] || exit "$status"
got="$(sort -n <<<"$out" | paste -sd ' ')"
echo "placement $2: $got"
[ "$got" = "$3" ] || { echo "placement $2: FAILED: expected $3" >&2; exit 1; }

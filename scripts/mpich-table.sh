#!/usr/bin/env bash
# docs/PERFORMANCE.md's MPICH table: auto against MPICH's own collective, every collective,
# np 2 and 4, 8 B to 64 MiB (scripts/auto-vs-mpi.sh under MPICH, hot).
#
#   scripts/mpich-table.sh OUTDIR [RUNS=5] [NPS="2 4"] [COLLECTIVES...]
set -euo pipefail
out="${1:?usage: mpich-table.sh OUTDIR [RUNS] [NPS] [COLLECTIVES...]}"
runs="${2:-5}"
nps="${3:-2 4}"
shift $(($# < 3 ? $# : 3))
COLLX_MPI=mpich exec "$(dirname "${BASH_SOURCE[0]}")/auto-vs-mpi.sh" "$out" "$runs" "$nps" hot "$@"

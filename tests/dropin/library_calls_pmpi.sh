#!/usr/bin/env bash
# libcollx calls no MPI function that libcollx_mpi intercepts: its own MPI calls (the shared
# arena's setup, UCX's address exchange, the transport's waits) go to the PMPI_ names, so the
# drop-in never comes back into collx from inside collx.
#   library_calls_pmpi.sh NM LIBCOLLX LIBCOLLX_MPI [ALLOWED...]
# LIBCOLLX: libcollx.so or libcollx.a; the intercepted functions are the MPI_ functions
# LIBCOLLX_MPI defines. ALLOWED: functions libcollx may call by their MPI_ name on purpose.
set -euo pipefail
nm_tool="$1" library="$2" dropin="$3"
shift 3
allowed=" $* "
dynamic=()
[[ "$library" == *.a ]] || dynamic=(-D)
intercepted="$("$nm_tool" -D --defined-only "$dropin" | awk '$2 == "T" && $3 ~ /^MPI_/ {print $3}' | sort -u)"
called="$("$nm_tool" "${dynamic[@]}" --undefined-only "$library" 2>/dev/null | awk '$NF ~ /^MPI_/ {print $NF}' | sort -u)"
[ -n "$intercepted" ] || { echo "library_calls_pmpi: $dropin defines no MPI_ function"; exit 1; }
[ -n "$called" ] || { echo "library_calls_pmpi: $library calls no MPI_ function (nm failed?)"; exit 1; }
status=0
for name in $(comm -12 <(echo "$intercepted") <(echo "$called")); do
  if [[ "$allowed" == *" $name "* ]]; then
    echo "library_calls_pmpi: $name (allowed)"
  else
    echo "library_calls_pmpi: libcollx calls $name, which libcollx_mpi intercepts: call PMPI_${name#MPI_}"
    status=1
  fi
done
[ $status -eq 0 ] && echo "library_calls_pmpi: OK ($(wc -l <<<"$intercepted") intercepted functions)"
exit $status

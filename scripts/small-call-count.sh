#!/usr/bin/env bash
# What one blocking 8 B call executes (issue 40: the cost of a small call), counted with
# valgrind --tool=callgrind (a call's own work counts the same whatever the machine's load; what
# rank 0 polls while it waits for the other ranks does not, and is its own column): the MPI
# library's own call, collx's delegated path and collx's own path, for broadcast (root 0) and
# reduce (root: the last rank) at NP ranks (default 2), and the program's own MPI_Bcast and
# MPI_Reduce through the drop-in where auto settled the size class on the MPI library's
# collective. Rank 0 runs under callgrind, counting only inside the probe's loop of CALLS calls
# (after 50 uncounted ones: start-up, MPI_Init and auto's trials are not counted); it is the
# root of the broadcast and a sender of the reduce, so it rarely waits, and its count is the
# call's work rather than polling (the other ranks run at
# full speed beside a rank slowed some 50x by callgrind). Instructions are split into collx's
# (functions in namespace collx, libcollx) and the rest (the MPI library, libc).
#
#   scripts/small-call-count.sh OUTDIR [NP=2] [CALLS=2000]
#
# COLLECTIVES (default "broadcast reduce") and PATHS (default "native delegated collx dropin";
# also dropin_collx: the drop-in on collx's own path, with COLLX_ALGO say)
# choose the rows: the probe also runs allreduce and barrier.
# Writes OUTDIR/table.md. The probe is tests/mpi/small_call_probe (built here where missing).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env

out="${1:?usage: small-call-count.sh OUTDIR [NP] [CALLS]}"
np="${2:-2}"
calls="${3:-2000}"
probe="$BUILD_DIR/tests/mpi/small_call_probe"
if [ ! -x "$probe" ] || [ ! -x "${probe}_dropin" ]; then
  collx_configure
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target small_call_probe small_call_probe_dropin
fi
command -v valgrind >/dev/null || { echo "small-call-count: valgrind is needed" >&2; exit 2; }
mkdir -p "$out"
wrapper="$out/callgrind-rank0.sh"
cat >"$wrapper" <<'EOF'
#!/usr/bin/env bash
# Rank 0 under callgrind, the others as they are.
rank="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"
if [ "$rank" = 0 ]; then
  exec valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*probe_calls*' \
    --callgrind-out-file="$CALLGRIND_OUT" "$@"
fi
exec "$@"
EOF
chmod +x "$wrapper"

# Instructions of a callgrind output file: "collx other collx_waiting". collx_waiting: collx's
# functions that poll while rank 0 waits for the other ranks (its progress callback, the wait
# loops): their count moves with the machine's load from run to run, the rest of collx's repeats
# to the instruction, so a change of a call's own work shows in collx minus collx_waiting.
split_counts() {
  callgrind_annotate --inclusive=no --threshold=100 "$1" 2>/dev/null | python3 -c '
import re, sys
waiting = re.compile(r"progress_callback|wait_for|for_each_batch|await_ready|take_completed|"
                     r"::poll|test_all|wait_all|yield_until_met|::met\(|progress_elsewhere|"
                     r"::progress\(|received\(|wait_in_place")
collx = other = polling = 0
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
    if not m or "PROGRAM TOTALS" in line or "file:function" in line:
        continue
    n = int(m.group(1).replace(",", ""))
    where = m.group(2)
    if "collx::" in where or "libcollx" in where:
        collx += n
        if waiting.search(where):
            polling += n
    else:
        other += n
print(collx, other, polling)'
}

table="$out/table.md"
{
  echo "One blocking call's instructions at rank 0 (callgrind), $np ranks, $COLLX_MPI: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$COLLX_ROOT" log --oneline -1 | cut -c1-7)"
  echo "machine: $(lscpu | grep -E '^CPU\(s\)|Model name' | sed 's/  */ /g' | tr '\n' ' ')"
  echo "command: COLLECTIVES=\"${COLLECTIVES:-broadcast reduce}\" PATHS=\"${PATHS:-native delegated collx dropin}\" scripts/small-call-count.sh $out $np $calls"
  echo
  echo "| collective | path | collx's instructions per call | of them waiting | the rest (MPI, libc) per call | total per call |"
  echo "|---|---|---:|---:|---:|---:|"
} >"$table"
for collective in ${COLLECTIVES:-broadcast reduce}; do
  for path in ${PATHS:-native delegated collx dropin}; do
    file="$out/callgrind.$collective.$path"
    program="$probe"
    case "$path" in dropin | dropin_collx) program="${probe}_dropin" ;; esac
    CALLGRIND_OUT="$file" collx_mpirun "$np" "$wrapper" "$program" "$path" "$collective" \
      "$calls" >/dev/null 2>"$out/stderr.$collective.$path" ||
      { echo "small-call-count: $collective $path failed (see $out)" >&2; exit 1; }
    read -r c o w <<<"$(split_counts "$file")"
    python3 -c "
c = $c / $calls; o = $o / $calls; w = $w / $calls
print(f'| $collective | $path | {c:.0f} | {w:.0f} | {o:.0f} | {c + o:.0f} |')" >>"$table"
  done
done
echo "small-call-count: $table"
cat "$table"

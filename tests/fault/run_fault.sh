#!/usr/bin/env bash
# Runs a fault-injection command with a time limit and checks how it ended:
#   run_fault.sh --limit SECONDS --np N --status zero|nonzero [--expect REGEX]...
#                [--each-rank REGEX]... [--reject REGEX]... -- COMMAND...
# The command must end within SECONDS (a hang is the failure these tests exist for), with the
# status asked for; every --expect must match the output (stdout and stderr together), every
# --each-rank must match once per rank with @R@ replaced by the rank (0 .. N-1), and no
# --reject may match. A crash report (segmentation fault, heap corruption, a sanitizer) always
# fails.
set -euo pipefail
limit="" np="" want=""
expect=() each=() reject=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --limit) limit="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --status) want="$2"; shift 2 ;;
    --expect) expect+=("$2"); shift 2 ;;
    --each-rank) each+=("$2"); shift 2 ;;
    --reject) reject+=("$2"); shift 2 ;;
    *) echo "run_fault: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 1 ] && [ -n "$limit" ] && [ -n "$np" ] && [ -n "$want" ] ||
  { echo "run_fault: usage: see the script's first lines" >&2; exit 2; }
shift  # --
reject+=("Segmentation fault|signal 11|SIGSEGV|malloc\(\)|corrupted|double free")
reject+=("AddressSanitizer|ThreadSanitizer|LeakSanitizer|runtime error:")

start=$(date +%s%N)
status=0
output="$(timeout -k 10 "$limit" "$@" 2>&1)" || status=$?
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s\n' "$output"
echo "run_fault: exit status $status after $elapsed ms (limit $limit s)"
fail() { echo "run_fault: FAILED: $*"; exit 1; }
# timeout(1) says 124, or 137 when it had to kill; a launcher whose rank was killed by SIGKILL
# also ends with 137, but early.
if [ "$status" -eq 124 ] || { [ "$status" -eq 137 ] && [ "$elapsed" -ge $((limit * 1000)) ]; }; then
  fail "the job did not end within $limit s (a hang)"
fi
case "$want" in
  zero) [ "$status" -eq 0 ] || fail "exit status $status, expected 0" ;;
  nonzero) [ "$status" -ne 0 ] || fail "exit status 0, expected a failure" ;;
  *) echo "run_fault: --status zero or nonzero" >&2; exit 2 ;;
esac
for re in "${expect[@]+"${expect[@]}"}"; do
  grep -Eq -- "$re" <<<"$output" || fail "no line matches: $re"
done
for re in "${each[@]+"${each[@]}"}"; do
  for ((r = 0; r < np; r++)); do
    grep -Eq -- "${re//@R@/$r}" <<<"$output" || fail "no line for rank $r matches: ${re//@R@/$r}"
  done
done
for re in "${reject[@]}"; do
  if grep -Eq -- "$re" <<<"$output"; then
    fail "a line matches what must not appear: $re: $(grep -Em1 -- "$re" <<<"$output")"
  fi
done
echo "run_fault: OK"

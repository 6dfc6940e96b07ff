#!/usr/bin/env bash
# A trainer killed mid-epoch resumes bitwise from its last checkpoint (issue 13):
#   run_resume.sh --work DIR --program COLLX_TRAIN --victim RANK --every K [--limit SECONDS]
#                 [--seed N] -- LAUNCHER... COLLX_TRAIN ARGS...
# 1. The command runs to its end, writing a checkpoint every K steps: the reference
#    weights_checksum and step count.
# 2. It runs again; once a checkpoint of a step past a point drawn from the seed has appeared
#    (and before the end), rank RANK is sent SIGKILL by its pid. The job must end within the
#    limit (no survivor may hang), with a failure status; the checkpoint left behind must be
#    whole (rank 0 writes it to a temporary file and renames it, so a kill mid-write leaves the
#    previous one).
# 3. The command runs a third time with --resume from that checkpoint: it must say it resumed at
#    the checkpoint's step and end with the reference's weights_checksum and step count, bitwise.
# A crash report (segmentation fault, abort, a sanitizer) in any run fails. The seed is printed;
# pass it back with --seed (or COLLX_RESUME_SEED=N ctest ...) to repeat the kill point.
set -uo pipefail
work="" program="" victim="" every="" limit=120 seed=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --program) program="$2"; shift 2 ;;
    --victim) victim="$2"; shift 2 ;;
    --every) every="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    *) echo "run_resume: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 1 ] && [ -n "$work" ] && [ -n "$program" ] && [ -n "$victim" ] && [ -n "$every" ] ||
  { echo "run_resume: usage: see the script's first lines" >&2; exit 2; }
shift  # --
command=("$@")
# The kill point: --seed, else COLLX_RESUME_SEED, else drawn (the kill's timing varies anyway).
[ -n "$seed" ] || seed=${COLLX_RESUME_SEED:-$(( $(date +%s%N) % 1000000007 ))}
program=$(readlink -f "$program")
mkdir -p "$work"
ckpt="$work/run.ckpt"
rm -f "$work"/*.ckpt "$work"/*.ckpt.tmp "$work"/*.log
echo "run_resume: seed $seed (repeat with --seed $seed), victim rank $victim, checkpoint every $every steps"

fail() {
  echo "run_resume: FAILED (seed $seed): $*"
  exit 1
}
crash_re='Segmentation fault|signal 11|SIGSEGV|signal 6|SIGABRT|Aborted|terminate called|malloc\(\)|corrupted|double free|AddressSanitizer|ThreadSanitizer|LeakSanitizer|runtime error:'
no_crash() {  # LOG WHAT
  if grep -Eq -- "$crash_re" "$1"; then
    fail "$2: a crash report: $(grep -Em1 -- "$crash_re" "$1")"
  fi
}
# The step recorded in a checkpoint's JSON header ("step":N; the sampler's is "step_in_epoch").
ckpt_step() {
  local match
  match=$(head -c 4096 "$1" 2>/dev/null | LC_ALL=C grep -ao '"step":[0-9]*' | head -1)
  echo "${match#*:}"
}
field() {  # LOG REGEX: the first capture of the final line
  sed -nE "s/^final: .*$2.*/\\1/p" "$1" | head -1
}
# Every process below PID (each process's parent from /proc/PID/stat, the field after the
# command name's closing parenthesis; no procps needed).
descendants() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
    { rest = $0; sub(/.*\) /, "", rest); split(rest, f, " "); parent[$1] = f[2]; pids[NR] = $1 }
    END {
      for (i = 1; i <= NR; ++i) {
        p = pids[i]; q = parent[p]
        while (q != "" && q != 0 && q != 1) { if (q == root) { print p; break } q = parent[q] }
      }
    }'
}
# The pid of rank R of the job under LAUNCHER: a descendant running PROGRAM whose environment
# says its rank (Open MPI, MPICH/Hydra, PMIx).
rank_pid() {
  local launcher=$1 rank=$2 pid
  for pid in $(descendants "$launcher"); do
    [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$program" ] || continue
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
        grep -Eqx "(OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK)=$rank"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---- 1. the reference: the whole run, with the same checkpoints ----
start=$(now_ms)
status=0
timeout -k 10 "$limit" "${command[@]}" --checkpoint "$work/reference.ckpt" \
  --checkpoint-every "$every" >"$work/reference.log" 2>&1 || status=$?
cat "$work/reference.log"
echo "run_resume: reference run: status $status after $(( $(now_ms) - start )) ms"
[ "$status" -eq 0 ] || fail "the reference run failed (status $status)"
no_crash "$work/reference.log" "reference run"
reference_sum=$(field "$work/reference.log" 'weights_checksum ([0-9a-f]{16})')
total_steps=$(field "$work/reference.log" 'steps ([0-9]+)')
[ -n "$reference_sum" ] && [ -n "$total_steps" ] || fail "the reference run printed no final line"
# The kill point: a checkpoint at or past a step drawn from the seed in the first half of the run.
checkpoints=$(( total_steps / every ))
[ "$checkpoints" -ge 4 ] || fail "the run has $total_steps steps, too few for checkpoints every $every"
kill_after=$(( every * (1 + seed % (checkpoints / 2)) ))
echo "run_resume: reference: $total_steps steps, weights_checksum $reference_sum; the kill comes once a checkpoint of step >= $kill_after is on disk"

# ---- 2. the same run, rank $victim killed after a checkpoint ----
start=$(now_ms)
"${command[@]}" --checkpoint "$ckpt" --checkpoint-every "$every" >"$work/killed.log" 2>&1 &
launcher=$!
cleanup() {  # the job's processes, by pid, if anything is left
  local p
  for p in $(descendants "$launcher") "$launcher"; do kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT
deadline=$(( start + limit * 1000 ))
seen=""
victim_pid=""
while :; do
  if ! kill -0 "$launcher" 2>/dev/null; then
    cat "$work/killed.log"
    fail "the job ended before the kill (last checkpoint step ${seen:-none}): make the run longer"
  fi
  [ "$(now_ms)" -lt "$deadline" ] || fail "no checkpoint of step >= $kill_after within $limit s"
  # The victim's pid first (the ranks start), then the checkpoint it must come after.
  if [ -z "$victim_pid" ]; then
    victim_pid=$(rank_pid "$launcher" "$victim") || victim_pid=""
  elif [ -f "$ckpt" ]; then
    seen=$(ckpt_step "$ckpt")
    if [ -n "$seen" ] && [ "$seen" -ge "$kill_after" ] && [ "$seen" -lt "$total_steps" ]; then
      break
    fi
  fi
  sleep 0.01
done
kill -KILL "$victim_pid"
killed_at=$(now_ms)
echo "run_resume: SIGKILL to rank $victim (pid $victim_pid) after the checkpoint of step $seen, $(( killed_at - start )) ms into the run"
# The job must end on its own (the launcher sees the rank die and ends the others).
end_limit=30
while kill -0 "$launcher" 2>/dev/null; do
  if [ $(( $(now_ms) - killed_at )) -ge $(( end_limit * 1000 )) ]; then
    cat "$work/killed.log"
    fail "the job did not end within $end_limit s of the kill (a hang)"
  fi
  sleep 0.05
done
status=0
wait "$launcher" || status=$?
trap - EXIT
cat "$work/killed.log"
echo "run_resume: killed run: status $status, ended $(( $(now_ms) - killed_at )) ms after the kill"
[ "$status" -ne 0 ] || fail "the killed job exited with status 0"
no_crash "$work/killed.log" "killed run"
if grep -q '^final: ' "$work/killed.log"; then fail "the killed run printed its final line"; fi
[ -f "$ckpt" ] || fail "no checkpoint after the kill"
resume_step=$(ckpt_step "$ckpt")
[ -n "$resume_step" ] && [ "$resume_step" -gt 0 ] && [ "$resume_step" -lt "$total_steps" ] ||
  fail "the checkpoint left by the killed run holds step '${resume_step}' (want 0 < step < $total_steps)"
[ $(( resume_step % every )) -eq 0 ] || fail "checkpoint of step $resume_step, not a multiple of $every"
leftover=""
[ -e "$ckpt.tmp" ] && leftover=" (a temporary $ckpt.tmp was left by the kill)"
echo "run_resume: the checkpoint on disk holds step $resume_step$leftover"

# ---- 3. resumed from that checkpoint ----
start=$(now_ms)
status=0
timeout -k 10 "$limit" "${command[@]}" --checkpoint "$ckpt" --checkpoint-every "$every" \
  --resume "$ckpt" >"$work/resumed.log" 2>&1 || status=$?
cat "$work/resumed.log"
echo "run_resume: resumed run: status $status after $(( $(now_ms) - start )) ms"
[ "$status" -eq 0 ] || fail "the resumed run failed (status $status)"
no_crash "$work/resumed.log" "resumed run"
grep -q "resumed at step $resume_step" "$work/resumed.log" ||
  fail "the resumed run does not say \"resumed at step $resume_step\""
resumed_sum=$(field "$work/resumed.log" 'weights_checksum ([0-9a-f]{16})')
resumed_steps=$(field "$work/resumed.log" 'steps ([0-9]+)')
[ "$resumed_steps" = "$total_steps" ] ||
  fail "the resumed run ended at step '$resumed_steps', the reference at $total_steps"
[ "$resumed_sum" = "$reference_sum" ] ||
  fail "weights_checksum $resumed_sum after resuming at step $resume_step, $reference_sum uninterrupted"
# The last checkpoints agree too (the same header and bytes: parameters and optimizer state).
cmp -s "$work/reference.ckpt" "$ckpt" ||
  fail "the final checkpoints of the resumed and the uninterrupted run differ"
echo "run_resume: OK: rank $victim killed after the checkpoint of step $seen, resumed from step $resume_step of $total_steps: weights_checksum $resumed_sum and the final checkpoint identical to the uninterrupted run"

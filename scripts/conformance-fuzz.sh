#!/usr/bin/env bash
# The drop-in's differential fuzzer for longer than CI runs it: random legal MPI programs
# (tests/conformance/conformance.cpp), each run through libcollx_mpi and through the MPI's own
# PMPI_ names in one job, compared bitwise; seeds one after another until SECONDS have passed,
# at each rank count in turn. A failure prints its seed and the command that replays it, and
# the script goes on; at the end, one line of totals (programs, calls compared, calls
# intercepted) and the exit status: 0 when every run passed.
#
#   scripts/conformance-fuzz.sh SECONDS [FIRST_SEED] [NPS]
#     COLLX_MPI=openmpi|mpich (default openmpi), NPS default "2 3 4 5 10",
#     CONFORMANCE_PROGRAMS programs per run (default 40).
# Builds what it needs in the chosen MPI's build folder (scripts/common.sh).
set -uo pipefail
seconds="${1:?usage: conformance-fuzz.sh SECONDS [FIRST_SEED] [NPS]}"
seed="${2:-1000}"
nps=(${3:-2 3 4 5 10})
programs="${CONFORMANCE_PROGRAMS:-40}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
set +e
collx_configure >/dev/null && cmake --build "$BUILD_DIR" -j "$(nproc)" --target collx_mpi conformance >/dev/null ||
  { echo "conformance-fuzz: build failed"; exit 2; }
collx_mpi_env
library="$(ls "$BUILD_DIR"/dropin/libcollx_mpi.so | head -1)"
program="$BUILD_DIR/tests/conformance/conformance"
runs=0 failed=0 total_programs=0 total_calls=0 total_intercepted=0
end=$((SECONDS + seconds))
while [ $SECONDS -lt $end ]; do
  for np in "${nps[@]}"; do
    [ $SECONDS -lt $end ] || break
    command=("$COLLX_MPIEXEC" -n "$np" "${COLLX_MPIEXEC_FLAGS[@]}" env LD_PRELOAD="$library"
             "$program" --seed "$seed" --programs "$programs" --deadline 600)
    output="$(timeout 700 "${command[@]}" 2>&1)"
    status=$?
    runs=$((runs + 1))
    if [ $status -ne 0 ] || ! grep -q "conformance: OK" <<<"$output"; then
      failed=$((failed + 1))
      echo "conformance-fuzz: FAILED (exit $status) seed $seed at $np ranks; replay:"
      echo "  ${command[*]}"
      grep -E "MISMATCH|HANG" <<<"$output" | head -5
    else
      total_programs=$((total_programs + $(sed -n 's/.*OK, \([0-9]*\) programs, .*/\1/p' <<<"$output")))
      total_calls=$((total_calls + $(sed -n 's/.* programs, \([0-9]*\) collective calls.*/\1/p' <<<"$output")))
      intercepted=$(sed -n 's/.*loaded, \([0-9]*\) calls intercepted.*/\1/p' <<<"$output")
      total_intercepted=$((total_intercepted + ${intercepted:-0} * np))
    fi
    seed=$((seed + 1))
  done
done
echo "conformance-fuzz: $COLLX_MPI, $runs runs ($failed failed), $total_programs programs," \
     "$total_calls collective calls compared, $total_intercepted calls intercepted (all ranks)," \
     "seeds up to $((seed - 1)), ${seconds} s"
[ $failed -eq 0 ]

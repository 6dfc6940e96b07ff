#!/usr/bin/env bash
# Runs an MPI command that must fail, and checks that every rank printed an error matching a
# pattern: expect_error.sh NP PATTERN MPIEXEC [MPIEXEC_ARGS...] -- PROGRAM [ARGS...]
# (the command line is "MPIEXEC -n NP MPIEXEC_ARGS... PROGRAM ARGS...").
set -u
np=$1
pattern=$2
mpiexec=$3
shift 3
launcher_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  launcher_args+=("$1")
  shift
done
shift  # --
output=$("$mpiexec" -n "$np" "${launcher_args[@]}" "$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_error: the command succeeded; it should have failed" >&2
  exit 1
fi
for ((rank = 0; rank < np; rank++)); do
  if ! printf '%s\n' "$output" | grep -Eq "collx-train \(rank $rank\): error: .*($pattern)"; then
    echo "expect_error: rank $rank printed no error matching: $pattern" >&2
    exit 1
  fi
done
if printf '%s\n' "$output" | grep -q "MPI_ABORT"; then
  echo "expect_error: the ranks did not agree on the error (MPI_Abort)" >&2
  exit 1
fi
echo "expect_error: all $np ranks reported it (status $status)"

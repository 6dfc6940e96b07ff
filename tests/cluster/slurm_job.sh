#!/usr/bin/env bash
# slurm_job.sh KIND EMULATED-CLUSTER SOURCE-DIR BUILD-DIR WORK-DIR CHECKER
# Submits slurm/KIND.sbatch (bench, train or tests; bench-mpirun: bench.sbatch with
# COLLX_LAUNCHER=mpirun instead of srun --mpi=pmix) from node1 of the emulated cluster with
# `sbatch --wait -N 2 -n 4`, small sizes, from WORK-DIR (not the checkout: the script must find it
# itself), then checks the job: its exit status, its output, and its result files with CHECKER
# (check_bench_json or check_train_json; unused for tests).
set -euo pipefail
kind="$1" emu="$2" src="$3" build="$4" work="$5" checker="$6"

fail() {
  echo "slurm_job $kind: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
cd "$work"
export COLLX_BUILD_DIR="$build"
args=()
script="${kind%-mpirun}"
launcher=srun
if [ "$kind" = bench-mpirun ]; then
  launcher=mpirun
  export COLLX_LAUNCHER=mpirun
fi
case "$kind" in
  bench | bench-mpirun) export BENCH_MAX=64K BENCH_FACTOR=8 BENCH_ITERS=3 BENCH_WARMUP=1 ;;
  train)
    export TRAIN_EPOCHS=2
    # shellcheck disable=SC2054  # --hidden takes a comma-separated list
    args=(--synthetic --synthetic-train 3000 --synthetic-test 501 --hidden 64,32 --batch 100)
    ;;
  tests) args=(-R '^(mpi_collectives_np4|mpi_collectives_np2|app_collx_info)$') ;;
  *) fail "unknown kind (bench, bench-mpirun, train or tests)" ;;
esac

status=0
"$emu" on node1 -- sbatch --wait -N 2 -n 4 "$src/slurm/$script.sbatch" "${args[@]}" \
  >sbatch.out 2>&1 || status=$?
cat sbatch.out
[ "$status" -ne 77 ] || exit 77
job="$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' sbatch.out)"
[ -n "$job" ] || fail "sbatch submitted no job"
out="collx-$script-$job.out"
echo "---- $out"
cat "$out" || fail "the job wrote no $out"
[ "$status" -eq 0 ] || fail "sbatch --wait: exit status $status"
results="results/$job"
grep -q "on node\[1-2\] (2 node(s), 4 ranks)" "$out" || fail "the job did not run on node1 and node2 with 4 ranks"

case "$kind" in
  bench | bench-mpirun)
    grep -q "launcher: $launcher" "$out" || fail "the job did not use $launcher"
    grep -q "Out of bounds values : 0 OK" "$out" || fail "no \"Out of bounds values : 0 OK\""
    "$checker" "$results/allreduce_np4.json" allreduce 4 || fail "$results/allreduce_np4.json"
    ;;
  train)
    grep -Eq "^final: test_acc 0\.[0-9]+ .*weights_checksum [0-9a-f]{16} \(same on all 4 ranks\)" "$out" ||
      fail "no final line of 4 ranks"
    "$checker" "$results/train.jsonl" 2 0.3 || fail "$results/train.jsonl"
    ;;
  tests)
    grep -q "100% tests passed, 0 tests failed out of 3" "$out" || fail "not 3 tests passed"
    tr -d '\n' <"$results/ctest-junit.xml" | grep -q 'tests="3"[^>]*failures="0"' || fail "$results/ctest-junit.xml"
    ;;
esac
echo "slurm_job $kind: job $job passed"

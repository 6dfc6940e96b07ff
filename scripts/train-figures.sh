#!/usr/bin/env bash
# The figures of docs/TRAINING.md in one go: every command RUNS times (default 3), the runs of
# one repetition interleaved so that every configuration sees the same background load;
# scripts/train_summary.py prints the medians as the tables of docs/TRAINING.md, with the load
# average each command started under (OUT_DIR/loadavg.txt).
#
#   scripts/train-figures.sh [RUNS] [OUT_DIR] [PARTS]
#
# PARTS (default "default strategies bubble"), any of:
#   default     sections 1-3: the default run at np=2 (accuracy, wall time); samples/s at np=1
#               and np=2 at the same global batch, 3 epochs each; --no-overlap at np=2;
#   strategies  section 5's table: dp, fsdp, tensor, pipeline (GPipe and 1F1B, 1/2/4/8
#               micro-batches), the bf16 / fp16 / PowerSGD hooks, at np = 1, 2, 4: samples/s,
#               exposed communication, bytes per step, memory per rank (2 epochs of 8192
#               samples, the second epoch's figures; the pipeline at np=4 is 2 replicas x 2
#               stages, as the default model has 3 layers; at np=1 it is one stage, m=4 only);
#   bubble      the bubble table: a model whose 2 stages are equal in forward and in backward
#               work (--hidden 16,512,512,512,512,512: auto splits it 4,3 at m >= 2, 0.545M / 1.08M
#               against 0.529M / 1.06M multiply-adds per sample), GPipe and 1F1B at m = 1, 2, 4,
#               8, np=2, with the default input-first backward and with --pipeline-backward whole;
#   bubble256   the same on --hidden 256,512, whose 2 stages cannot be equal in both passes
#               (the first layer has no input gradient and is most of the work);
#   bubble4     4 stages at np=4 (--hidden 16 then nine 512s, auto split 4,2,2,3 at m >= 4), both backward
#               modes, oversubscribed on fewer than 4 cores (its "not running" column then says
#               how far to trust it);
#   accuracy    each strategy's default run at np=2 (12 epochs), once per repetition: the
#               test accuracy each reaches (deterministic: one repetition is enough).
# About 10 minutes on 2 idle cores with RUNS=3. Needs a Release build in $COLLX_BUILD_DIR
# (default build/) and dataset-fashion-mnist. np=4 runs oversubscribed on a 2-core machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
collx_mpi_env
runs=${1:-3}
out=${2:-train-figures}
parts=${3:-default strategies bubble}
mkdir -p "$out"
rm -f "$out"/*.json "$out/loadavg.txt"
train="$BUILD_DIR/apps/train/collx-train"
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(lscpu | grep 'Model name' | sed 's/  */ /g')," \
    "$(nproc) cores; parts: $parts; commit $(git -C "$COLLX_ROOT" rev-parse --short HEAD)"
  # The machine's memory bandwidth: one rank copying 64 MiB (collx-bench's memcpy row).
  collx_mpirun 1 "$BUILD_DIR/apps/bench/collx-bench" allreduce -b 64M -e 64M -a memcpy -n 20 \
    -w 3 </dev/null | awk '/^ *[0-9]/ && $6 == "memcpy" {
      printf "# memcpy of 64 MiB, one rank: %.2f ms = %.2f GB/s (collx-bench allreduce -b 64M " \
        "-e 64M -a memcpy -n 20 -w 3)\n", $7 / 1000, $8 }'
} >"$out/loadavg.txt"

# run NAME NP ARGS...: one collx-train run logged to OUT_DIR/NAME_rR.json
run() {
  local name=$1 np=$2
  shift 2
  echo "$name r$r $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/loadavg.txt"
  # More ranks than cores: Open MPI's waits yield the core to the other ranks.
  local yield=0
  [ "$np" -gt "$(nproc)" ] && yield=1
  echo "+ OMPI_MCA_mpi_yield_when_idle=$yield $COLLX_MPIEXEC -n $np ${COLLX_MPIEXEC_FLAGS[*]} $train --no-progress $* --log-json $out/${name}_r$r.json"
  OMPI_MCA_mpi_yield_when_idle=$yield collx_mpirun "$np" "$train" --no-progress "$@" \
    --log-json "$out/${name}_r$r.json" </dev/null
}

has() { [[ " $parts " == *" $1 "* ]]; }

# The strategies' table: 16 steps of the default model; PowerSGD compresses from step 3.
short=(--epochs 2 --train-limit 8192 --powersgd-warmup 2)
strategies() {
  local np
  for np in 1 2 4; do
    run "strat_dp_np$np" "$np" "${short[@]}"
    run "strat_fsdp_np$np" "$np" "${short[@]}" --parallel fsdp
    run "strat_tensor_np$np" "$np" "${short[@]}" --parallel tensor
    run "strat_bf16_np$np" "$np" "${short[@]}" --compress bf16
    run "strat_fp16_np$np" "$np" "${short[@]}" --compress fp16
    run "strat_powersgd_np$np" "$np" "${short[@]}" --compress powersgd
    local schedule m replicas=()
    [ "$np" = 4 ] && replicas=(--replicas 2)
    for schedule in gpipe 1f1b; do
      for m in 1 2 4 8; do
        [ "$np" = 1 ] && { [ "$schedule" = gpipe ] && [ "$m" = 4 ] || continue; }
        run "strat_pipeline-$schedule-m$m""_np$np" "$np" "${short[@]}" --parallel pipeline \
          --pipeline-schedule "$schedule" --micro-batches "$m" "${replicas[@]}"
      done
    done
  done
}

# bubble_sweep PREFIX NP ARGS...: GPipe and 1F1B at m = 1, 2, 4, 8.
bubble_sweep() {
  local prefix=$1 np=$2 schedule m
  shift 2
  for schedule in gpipe 1f1b; do
    for m in 1 2 4 8; do
      run "${prefix}_$schedule-m$m" "$np" --parallel pipeline --pipeline-schedule "$schedule" \
        --micro-batches "$m" --epochs 2 --train-limit 8192 "$@"
    done
  done
}
balanced2=(--hidden 16,512,512,512,512,512)
balanced4=(--hidden 16,512,512,512,512,512,512,512,512,512)
bubble() {
  bubble_sweep bubble 2 "${balanced2[@]}"
  bubble_sweep bubblewhole 2 "${balanced2[@]}" --pipeline-backward whole
}
bubble256() {
  bubble_sweep bubble256 2 --hidden 256,512
  bubble_sweep bubble256whole 2 --hidden 256,512 --pipeline-backward whole
}
bubble4() {
  bubble_sweep bubble4 4 "${balanced4[@]}"
  bubble_sweep bubble4whole 4 "${balanced4[@]}" --pipeline-backward whole
}

accuracy() {
  run acc_dp_np2 2
  run acc_fsdp_np2 2 --parallel fsdp
  run acc_pipeline_np2 2 --parallel pipeline
  run acc_tensor_np2 2 --parallel tensor
  run acc_bf16_np2 2 --compress bf16
  run acc_fp16_np2 2 --compress fp16
  run acc_powersgd_np2 2 --compress powersgd
}

for ((r = 1; r <= runs; r++)); do
  echo "== run $r of $runs"
  if has default; then
    run default_np2 2
    run scaling_np1 1 --epochs 3
    run scaling_np2 2 --epochs 3
    run nooverlap_np2 2 --epochs 3 --no-overlap
  fi
  if has strategies; then strategies; fi
  if has bubble; then bubble; fi
  if has bubble256; then bubble256; fi
  if has bubble4; then bubble4; fi
  if has accuracy && [ "$r" = 1 ]; then accuracy; fi
done
python3 "$(dirname "${BASH_SOURCE[0]}")/train_summary.py" "$out"

#!/usr/bin/env bash
# Every GPU check of the project in one go, on a node with an NVIDIA GPU and a Release build
# with CUDA in $BUILD_DIR (default build/): the machine, collx-info, `ctest -L gpu`,
# compute-sanitizer on the reduction kernels, the kernel bandwidth against cudaMemcpy, the
# device-buffer allreduce at np=2 (host buffers, device buffers staged, and direct over a UCX
# built with CUDA when UCX_CUDA_PREFIX names one), and collx-train --device cuda at np=1 and 2.
# Logs and JSON go to OUT_DIR; the last lines printed are a summary.
#
#   scripts/gpu-check.sh OUT_DIR [PARTS]
#
# PARTS (default "machine tests sanitizer kernels allreduce train ucx"). Knobs for a short lease:
# TESTS_EXCLUDE (a ctest -E regex), TESTS_LIMIT (seconds for all the tests, default 600),
# BENCH_MAX (the allreduce's largest size, default 256M), BENCH_ARGS (default "-f 4 -n 10 -w 3"),
# BENCH_LIMIT and TRAIN_LIMIT (seconds per run, default 150 and 90), SANITIZER_TOOLS,
# TRAIN_EPOCHS (default 3), TRAIN_PARTS (default "np1 np2 nooverlap wide float64"). UCX_SRC_TGZ may name a
# tarball of UCX's source (autogen'd) to build with CUDA into UCX_CUDA_PREFIX first, in the
# background while the tests run (its log: OUT_DIR/ucx-build.log).
set -uo pipefail
out=${1:?usage: gpu-check.sh OUT_DIR [PARTS]}
parts=${2:-machine tests sanitizer kernels allreduce train ucx}
B=${BUILD_DIR:-build}
mkdir -p "$out"
summary=()
note() { summary+=("$*"); echo "== $*"; }
has() { [[ " $parts " == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_op=^avx

ucx_pid=
if [ -n "${UCX_SRC_TGZ:-}" ] && [ -n "${UCX_CUDA_PREFIX:-}" ] && has ucx; then
  (set -e; export -n OMPI_MCA_op; d=$(mktemp -d); tar -xzf "$UCX_SRC_TGZ" -C "$d"; cd "$d"/*;
   nvml=$(dirname "$(find /usr/local/cuda*/ /usr/include -name nvml.h 2>/dev/null | head -1)")
   ./contrib/configure-release --prefix="$UCX_CUDA_PREFIX" --with-cuda=/usr/local/cuda \
     --without-rocm --without-verbs --without-mlx5 --without-gda --without-rdmacm --without-knem --without-xpmem --without-go \
     --without-java --disable-doxygen-doc CPPFLAGS="-I$nvml" \
     LDFLAGS="-L/usr/local/cuda/lib64/stubs -L/usr/local/cuda/lib64"
   # The libraries and ucx_info only: src/tools/perf's CUDA kernels include the GDA-KI headers
   # wherever infiniband/mlx5dv.h exists, and those want DOCA's gpunetio.
   for d in src/ucm src/ucs src/uct src/ucp src/tools/info; do
     timeout 300 make -C "$d" -j "$(($(nproc) - 2))" >/dev/null && make -C "$d" install >/dev/null
   done) >"$out/ucx-build.log" 2>&1 &
  ucx_pid=$!
fi

if has machine; then
  { date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    nvcc --version | tail -2; lscpu | grep -E '^Model name|^CPU\(s\)|^L3'; df -h /dev/shm | tail -1
    mpirun --version | head -1; } >"$out/machine.txt" 2>&1
  cat "$out/machine.txt"
  "$B/apps/info/collx-info" >"$out/info.txt" 2>&1; head -14 "$out/info.txt"
fi

if has tests; then
  (cd "$B" && timeout -k 5 "${TESTS_LIMIT:-600}" ctest -L gpu ${TESTS_EXCLUDE:+-E "$TESTS_EXCLUDE"} \
    --output-on-failure --timeout 60) >"$out/ctest-gpu.txt" 2>&1
  rc=$?
  pkill -9 -f "$B/tests/" 2>/dev/null; pkill -9 orted 2>/dev/null
  # ctest does not always end a hung mpiexec (it waits for the job's output): name the test.
  [ $rc -ge 124 ] && note "ctest stopped after ${TESTS_LIMIT:-600} s in: $(grep -E '^ *Start' "$out/ctest-gpu.txt" | tail -1)"
  note "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.txt" | tail -1)"
  grep -E '^\s+[0-9]+ - |Skipped|Not Run' "$out/ctest-gpu.txt" | head -20
fi

if has kernels; then
  "$B/apps/kernel-bench-gpu/collx-kernel-bench-gpu" --mib 256 -n 20 -w 3 --check-target \
    >"$out/kernels.txt" 2>&1
  note "kernel bench 256 MiB: rc $? (3 = below target)"; cat "$out/kernels.txt"
fi


bench_allreduce() {  # NAME ENV... -- ARGS: one run at np=2, 8 B .. 256 MiB
  local name=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done; shift
  timeout "${BENCH_LIMIT:-150}" mpirun -np 2 --oversubscribe --bind-to none "${envs[@]}" "$B/apps/bench/collx-bench" \
    allreduce -b 8 -e "${BENCH_MAX:-256M}" ${BENCH_ARGS:--f 4 -n 10 -w 3} \
    -a ring,recursive_doubling,rabenseifner,auto,mpi -c 1 --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>&1
  note "allreduce $name: rc $? $(grep -c 'Out of bounds values : 0 OK' "$out/$name.txt") OK line(s)"
}
if has allreduce; then
  bench_allreduce allreduce_host -- -m host
  COLLX_CUDA_AWARE=0 bench_allreduce allreduce_device_staged COLLX_CUDA_AWARE -- -m device
fi
# The UCX build ran beside the tests and benchmarks above.
[ -n "$ucx_pid" ] && { wait "$ucx_pid"; note "UCX build with CUDA: rc $? ($(tail -1 "$out/ucx-build.log"))"; }
if has ucx && [ -n "${UCX_CUDA_PREFIX:-}" ] && [ -e "$UCX_CUDA_PREFIX/lib/libucp.so.0" ]; then
  LD_LIBRARY_PATH=$UCX_CUDA_PREFIX/lib:$LD_LIBRARY_PATH "$B/apps/info/collx-info" >"$out/info-ucx.txt" 2>&1
  grep -E 'UCX|device buffers' "$out/info-ucx.txt"
  # Its own libraries first: the staged Open MPI brings UCX 1.13's, which lacks its symbols.
  LD_LIBRARY_PATH=$UCX_CUDA_PREFIX/lib:$LD_LIBRARY_PATH "$UCX_CUDA_PREFIX/bin/ucx_info" -d \
    >"$out/ucx-info.txt" 2>&1
  note "ucx_info -d: $(grep -oE 'Transport: [a-z_0-9]+' "$out/ucx-info.txt" | sort -u | tr '\n' ' ')"
  LD_LIBRARY_PATH=$UCX_CUDA_PREFIX/lib:$LD_LIBRARY_PATH bench_allreduce allreduce_device_ucx \
    LD_LIBRARY_PATH -- -m device --transport mpi,ucx
fi

if has train; then
  # The default model on a synthetic set of Fashion-MNIST's size, then a wider one (a GPU step of
  # the default model is short: per-step costs weigh more than the GEMMs).
  t="$B/apps/train/collx-train --device cuda --no-progress --synthetic --synthetic-train 60000 --synthetic-test 10000 --epochs ${TRAIN_EPOCHS:-3}"
  train_run() {  # NAME NP ARGS...
    local name=$1 np=$2; shift 2
    timeout "${TRAIN_LIMIT:-90}" mpirun -np "$np" --oversubscribe --bind-to none $t --log-json "$out/$name.json" "$@" >"$out/$name.txt" 2>&1
    note "$name: rc $? | $(grep '^epoch' "$out/$name.txt" | tail -1) | $(tail -1 "$out/$name.txt")"
  }
  for part in ${TRAIN_PARTS:-np1 np2 nooverlap wide float64}; do
    case $part in
      np1) train_run train_np1 1 ;;
      np2) train_run train_np2 2 --verify-replicas ;;
      nooverlap) train_run train_np2_nooverlap 2 --no-overlap ;;
      wide)
        train_run train_wide_np1 1 --hidden 4096,4096,4096 --batch 4096 --epochs 2
        train_run train_wide_np2 2 --hidden 4096,4096,4096 --batch 4096 --epochs 2
        train_run train_wide_np2_nooverlap 2 --hidden 4096,4096,4096 --batch 4096 --epochs 2 --no-overlap ;;
      float64) train_run train_np2_float64 2 --dtype float64 --epochs 2 ;;
    esac
  done
fi

if has sanitizer && command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    compute-sanitizer --tool $tool --error-exitcode 9 "$B/tests/device_reduce_test" \
      --gtest_filter='DeviceReduce.EveryPairSmallSizesEveryLayout' \
      >"$out/sanitizer-$tool.txt" 2>&1
    note "compute-sanitizer $tool (device_reduce_test): rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.txt" | tail -1)"
  done
fi

echo "================ summary"
printf '%s\n' "${summary[@]}"

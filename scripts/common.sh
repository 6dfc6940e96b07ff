# Shared by run-main.sh and run-tests.sh: install what is missing (Debian 12, apt-get), build.
set -euo pipefail

COLLX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The MPI, chosen once for the build, the tests and every script: COLLX_MPI=openmpi (default)
# or mpich. Each has a build folder of its own (COLLX_BUILD_DIR overrides it), its launcher
# (COLLX_MPIEXEC) and the flags that let it run more ranks than cores (COLLX_MPIEXEC_FLAGS).
# collx_choose_mpi NAME [BUILD_DIR]: sets COLLX_MPI, BUILD_DIR and COLLX_MPIEXEC_FLAGS.
collx_choose_mpi() {
  COLLX_MPI="$1"
  case "$COLLX_MPI" in
    openmpi)
      BUILD_DIR="${2:-${COLLX_BUILD_DIR:-$COLLX_ROOT/build}}"
      COLLX_MPIEXEC_FLAGS=(--oversubscribe)
      ;;
    mpich)
      BUILD_DIR="${2:-${COLLX_BUILD_DIR:-$COLLX_ROOT/build-mpich}}"
      COLLX_MPIEXEC_FLAGS=()  # hydra places any number of ranks
      ;;
    *)
      echo "collx: COLLX_MPI=$COLLX_MPI: use openmpi or mpich" >&2
      exit 2
      ;;
  esac
}
collx_choose_mpi "${COLLX_MPI:-openmpi}"

# Debian packages the main job (the library and collx-train) needs: what ./run-main.sh installs.
COLLX_MAIN_PACKAGES=(
  build-essential cmake pkg-config
  python3                       # the configuration's test generators (layering, docs, model)
  openmpi-bin libopenmpi-dev libucx-dev
  libgtest-dev libcli11-dev nlohmann-json3-dev  # the build's configuration and the apps' flags
  libopenblas-dev zlib1g-dev    # collx-train: GEMM (cblas), gzipped data sets
  dataset-fashion-mnist         # collx-train's data (the main job)
)
# And what the whole test suite needs besides: ./run-tests.sh installs both lists.
COLLX_TEST_PACKAGES=(
  mpich libmpich-dev            # the second MPI (COLLX_MPI=mpich; ./run-tests.sh runs both)
  gfortran                      # the drop-in's Fortran tests (mpif.h, use mpi)
  iproute2 iputils-ping munge slurmctld slurmd slurm-client  # tests -L cluster: scripts/emulated-cluster
  python3-venv python3-dev      # the torch.distributed backend: PyTorch from PyPI (below)
  libsimgrid-dev                # SimGrid's SMPI: collx at 1,000 simulated ranks (docs/SCALE.md)
)

# collx_install_packages [main]: installs what is missing of both lists (of the main job's only
# with `main`).
collx_install_packages() {
  local wanted=("${COLLX_MAIN_PACKAGES[@]}")
  [ "${1:-}" = main ] || wanted+=("${COLLX_TEST_PACKAGES[@]}")
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "collx: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# PyTorch for the torch.distributed backend (collx_torch): the pinned 2.x of
# torch/requirements.txt, from PyPI, in a virtual environment of Debian's python3 in build-venv/
# (COLLX_TORCH_VENV elsewhere), which the build and the tests use (COLLX_TORCH_PYTHON). Installed
# again only when torch/requirements.txt changes. COLLX_TORCH_VENV=none installs nothing (the
# backend is then built only if the interpreter given as COLLX_TORCH_PYTHON has torch 2.x).
COLLX_TORCH_VENV="${COLLX_TORCH_VENV:-$COLLX_ROOT/build-venv}"
collx_install_torch() {
  [ "$COLLX_TORCH_VENV" != none ] || return 0
  local requirements="$COLLX_ROOT/torch/requirements.txt" stamp="$COLLX_TORCH_VENV/.collx-requirements"
  if [ -x "$COLLX_TORCH_VENV/bin/python" ] && cmp -s "$requirements" "$stamp"; then
    return 0
  fi
  echo "collx: installing $(grep -m1 '^torch==' "$requirements") from PyPI into $COLLX_TORCH_VENV"
  rm -f "$stamp"
  /usr/bin/python3 -m venv "$COLLX_TORCH_VENV"
  "$COLLX_TORCH_VENV/bin/python" -m pip install --quiet --no-input -r "$requirements"
  cp "$requirements" "$stamp"
}

# collx_configure [CMAKE OPTIONS...]: configures BUILD_DIR for COLLX_MPI (cmake/mpi_choice.cmake).
collx_configure() {
  local torch=()
  [ "$COLLX_TORCH_VENV" = none ] || torch=(-DCOLLX_TORCH_PYTHON="$COLLX_TORCH_VENV/bin/python")
  cmake -S "$COLLX_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCOLLX_MPI="$COLLX_MPI" \
    "${torch[@]}" "$@"
}

# collx_build [CMAKE OPTIONS...]: configures and builds every target.
collx_build() {
  collx_configure "$@"
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

# collx_build_smpi [CMAKE OPTIONS...]: the build against SimGrid's SMPI (COLLX_MPI=smpi, static
# libcollx, collx-bench and tests/smpi; docs/SCALE.md) in COLLX_SMPI_BUILD_DIR (build-smpi).
collx_build_smpi() {
  local dir="${COLLX_SMPI_BUILD_DIR:-$COLLX_ROOT/build-smpi}"
  cmake -S "$COLLX_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCOLLX_MPI=smpi "$@" &&
    cmake --build "$dir" -j "$(nproc)"
}

# collx_step_done NAME: prints how long the step that just ended took (and the run so far).
collx_step_started=$SECONDS
collx_step_done() {
  echo "collx: $1 took $((SECONDS - collx_step_started)) s (${SECONDS} s so far)"
  collx_step_started=$SECONDS
}

# The launcher and the environment of the chosen MPI (after collx_install_packages).
collx_mpi_env() {
  # Debian names both MPIs' programs by suffix; elsewhere (modules, Cray) the mpiexec on PATH.
  COLLX_MPIEXEC="$(command -v "mpiexec.$COLLX_MPI" || command -v mpiexec || echo mpiexec)"
  if [ "$COLLX_MPI" = openmpi ]; then
    # Open MPI refuses root unless told; CI and fresh machines run as root.
    if [ "$(id -u)" -eq 0 ]; then
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    # Debian's Open MPI 4.1.4 computes int8/uint8 MPI_SUM with saturating AVX adds: the `mpi`
    # reference rows need its plain C reduction.
    export OMPI_MCA_op='^avx'
  fi
}

# collx_mpirun NP COMMAND...: COMMAND on NP ranks of this machine with the chosen MPI.
collx_mpirun() {
  local np="$1"
  shift
  "$COLLX_MPIEXEC" -n "$np" "${COLLX_MPIEXEC_FLAGS[@]}" "$@"
}

# The sanitizer step of run-tests.sh (issue 13): the library and a chosen subset of the tests
# built with AddressSanitizer and UndefinedBehaviorSanitizer (COLLX_SANITIZE, cmake/sanitize.cmake)
# in BUILD_DIR-asan, and run (about 4 minutes on CI's two cores):
#  - the unit and simulated-rank test programs, each run once (not a process per test), the
#    simulated ranks at p = 1-5 and 8 (COLLX_ASAN_SIM_FILTER; the plain build runs them all);
#  - the collectives suite at 2, 3 and 4 ranks, the allreduce suite at 2, the nonblocking tests
#    with and without the progress thread and the emulated-device suite at 2 ranks, and the
#    stress test at 3 ranks with 200 cases (COLLX_ASAN_MPI_TESTS).
# Undefined behaviour stops the test. Leak checking is on for the unit programs and off under
# mpiexec: Open MPI keeps memory until the process ends and unloads its components in
# MPI_Finalize, so LeakSanitizer reports some 50 leaks per rank whose stacks end in
# "<unknown module>" and cannot be told apart from collx's (or suppressed by library).
# ThreadSanitizer is not in CI (docs/RELIABILITY.md says how to run it).
COLLX_ASAN_UNIT_TESTS=(
  types_test kernels_test patterns_test config_test tuning_test reduce_ops_test
  ring_stores_test phases_test device_memory_test allreduce_sim_test collectives_sim_test
  in_place_sim_test
)
COLLX_ASAN_MPI_TARGETS=(mpi_allreduce_test mpi_collectives_test mpi_progress_test
                        mpi_device_emulated_test collx_stress)
COLLX_ASAN_SIM_FILTER="-*/6:*/7:*/9:*/1?:*/2?:*/3?:SimCollectivesLarge.*"
COLLX_ASAN_MPI_TESTS='^(mpi_collectives_np[234]|mpi_allreduce_np2|mpi_progress_(thread|none)_np2'
COLLX_ASAN_MPI_TESTS+='|device_emulated_staged_np2|stress_np3)$'
# collx_sanitizer_build: configures and builds BUILD_DIR-asan (the targets above);
# collx_sanitizer_run [CTEST ARGUMENTS...]: runs them; collx_sanitizer_step [CTEST ARGUMENTS...]:
# both.
collx_sanitizer_build() {
  local dir="$BUILD_DIR-asan"
  # -O1 (NDEBUG as in Release; the host kernels keep their own -O3): the sanitized build is
  # most of this step, and -O1 compiles in about 60 % of -O3's time (collectives_sim_test.cpp
  # 11 s against 19 s) while the sanitized tests run as fast (the MPI tests 58 s against 65 s).
  cmake -S "$COLLX_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCOLLX_MPI="$COLLX_MPI" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCOLLX_SANITIZE=address,undefined -DCOLLX_CUDA=OFF -DCOLLX_TORCH=OFF \
    -DCOLLX_BUILD_DROPIN=OFF -DCOLLX_BUILD_APPS=OFF || return 1
  # (set -e does not apply inside a function called as `f || status=$?`: every step says so.)
  cmake --build "$dir" -j "$(nproc)" --target "${COLLX_ASAN_UNIT_TESTS[@]}" \
    "${COLLX_ASAN_MPI_TARGETS[@]}" || return 1
}
collx_sanitizer_run() {
  local dir="$BUILD_DIR-asan" status=0 t
  local -x UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  for t in "${COLLX_ASAN_UNIT_TESTS[@]}"; do
    echo "collx: sanitized $t"
    local filter="*"
    [[ $t == *_sim_test ]] && filter="$COLLX_ASAN_SIM_FILTER"
    ASAN_OPTIONS="abort_on_error=1" "$dir/tests/$t" --gtest_brief=1 --gtest_filter="$filter" ||
      status=1
  done
  (cd "$dir" && ASAN_OPTIONS="abort_on_error=1:detect_leaks=0" COLLX_STRESS_CASES=200 \
    ctest --output-on-failure -j "$(nproc)" -R "$COLLX_ASAN_MPI_TESTS" "$@") || status=1
  return $status
}
collx_sanitizer_step() {
  collx_sanitizer_build || return 1
  collx_sanitizer_run "$@"
}

#!/usr/bin/env bash
# The whole test suite: install, build, then every unit, simulated-rank and mpirun test.
# COLLX_MPI=openmpi or COLLX_MPI=mpich: the whole suite on that MPI only, then a subset built with
# ASan+UBSan (BUILD_DIR-asan). Unset: the whole suite and the sanitized subset on Open MPI,
# then the MPI tests on MPICH (static libraries, in BUILD_DIR-mpich-static): the
# collectives and allreduce suites at 2-5 ranks (every collective and algorithm), the MPI
# library's own collectives as collx's mpi row at 1-4 ranks (delegated path included), the drop-in
# at 2 and 3 ranks (C; preloaded and disabled at 2) and 1 and 3 (Fortran), its delegated calls at
# 1-4 ranks, the drop-in's conformance tests at 2, 3, 4, 5 and 10 ranks, and the installed
# package; then the SimGrid SMPI build and its tests (ctest -L smpi, build-smpi). The builds
# after the first run beside the Open MPI suite (below). Arguments go to ctest (every run).
both_mpis=0
[ -z "${COLLX_MPI:-}" ] && both_mpis=1
source "$(dirname "${BASH_SOURCE[0]}")/scripts/common.sh"
# Each step says how long it took (collx_step_done), so a slow CI run shows where.
collx_install_packages
collx_install_torch
collx_step_done "install"
collx_build
collx_step_done "build"
status=0
# The other builds (the sanitized subset's; with both MPIs MPICH's and SMPI's) run one after the
# other beside the Open MPI suite, at the lowest priority (nice 19): the suite's MPI jobs leave
# about a quarter of the two cores idle (ctest alone: 11 min of wall time, 16 min of CPU), which
# the builds take. They still slow the suite (608 s alone, 830 s beside them, in two CI runs on
# the Intel VM of 2026-12-01): the whole run was 68 s shorter in that one comparison
# (docs/TESTING.md). Their tests run after the suite. Their output goes to
# BUILD_DIR/other-builds.log, printed once they end.
mpich_tests='^((mpi_allreduce|mpi_collectives)_np[2-5]|mpi_library_np[1-4]'
mpich_tests+='|dropin_np[23]|dropin_(fortran|preload|disabled).*|dropin_delegated_np[1-4]'
mpich_tests+='|package_(install|cmake_CXX|dropin_.*)'
mpich_tests+='|dropin_error_codes|conformance_(patterns|fuzz)_np([2345]|10)|conformance_errors_np3'
mpich_tests+='|selector_grid_test)$'
mpich_targets=(collx collx_mpi mpi_allreduce_test mpi_collectives_test mpi_library_test dropin_check
               dropin_check_plain dropin_check_fortran_mpifh dropin_check_fortran_module
               dropin_delegated_calls
               dropin_error_codes_test conformance selector_grid_test)
mpich_build_dir="$BUILD_DIR-mpich-static"
# The MPICH pass: no CUDA kernels and no torch module a second time: this pass is about the MPI.
# Only what its tests run is built: the two MPI test programs, the drop-in's programs, and what
# package_install installs (libcollx, libcollx_mpi); the package tests build their programs
# themselves. A test whose program was not built fails (ctest: "Could not find executable"), it
# is not skipped. The consumer project in C++ (the package's promise to MPICH users) and the
# drop-in's link and preload (the C+C++ and pkg-config consumers run on Open MPI). No link-time
# optimisation: with static libraries every test program's link would optimise the whole library
# again, and the Open MPI build has already compiled it so. -O1, as the sanitized build (the host
# kernels keep their own -O3): this pass checks what the MPI does with collx's calls, and -O1
# compiles in about 60 % of -O3's time. And the built-in rules' grid as MPICH builds them (its
# MPICH-only rows: tests/unit/data/selector-grid-mpich.txt).
mpich_build() {
  collx_choose_mpi mpich "$mpich_build_dir"
  collx_configure -DBUILD_SHARED_LIBS=OFF -DCOLLX_BUILD_APPS=OFF -DCOLLX_CUDA=OFF \
    -DCOLLX_TORCH=OFF -DCOLLX_LTO=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" &&
    cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${mpich_targets[@]}"
}
other_builds_log="$BUILD_DIR/other-builds.log"
(
  renice -n 19 -p "$BASHPID" >/dev/null
  failed=""
  collx_sanitizer_build || failed+=" sanitized"
  if [ $both_mpis -eq 1 ]; then
    (mpich_build) || failed+=" MPICH"
    # SimGrid's SMPI (docs/SCALE.md): libcollx and collx-bench built against the simulator
    # (build-smpi).
    collx_build_smpi || failed+=" SMPI"
  fi
  [ -z "$failed" ] || { echo "collx: these builds failed:$failed"; exit 1; }
) >"$other_builds_log" 2>&1 &
other_builds=$!
collx_mpi_env
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "$@") || status=$?
collx_step_done "tests on $COLLX_MPI"
other_builds_status=0
wait $other_builds || other_builds_status=$?
cat "$other_builds_log"
[ $other_builds_status -eq 0 ] || status=1
collx_step_done "the other builds, after the suite"
# A subset again, built with AddressSanitizer + UndefinedBehaviorSanitizer in BUILD_DIR-asan
# (scripts/common.sh, collx_sanitizer_build, says which tests).
collx_sanitizer_run "$@" || status=$?
collx_step_done "sanitized tests"
[ $both_mpis -eq 1 ] || exit $status

collx_choose_mpi mpich "$mpich_build_dir"
collx_mpi_env
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" -R "$mpich_tests" "$@") || status=$?
collx_step_done "MPICH tests"

# SimGrid's SMPI: every collective and algorithm checked exactly at 16, 24 and 64 simulated
# ranks on the repository's platforms (ctest -L smpi).
(cd "${COLLX_SMPI_BUILD_DIR:-$COLLX_ROOT/build-smpi}" &&
  ctest --output-on-failure -j "$(nproc)" -L smpi "$@") || status=$?
collx_step_done "SMPI tests"
exit $status

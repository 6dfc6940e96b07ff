#!/usr/bin/env bash
# Builds and runs a user's program against an installed collx, as a user would.
#   consumer.sh install        cmake --install the build into a staging prefix, then move it:
#                              everything below must work from a prefix it was not installed to
#   consumer.sh cmake LANGS    a CMake project `project(app LANGS)` (LANGS: "CXX" or "C;CXX")
#   consumer.sh pkgconfig      the same program built with pkg-config's flags only
#   consumer.sh dropin MODE    an unmodified MPI C program with libcollx_mpi: MODE `link` (linked
#                              before libmpi) or `preload` (LD_PRELOAD)
# Environment (from ctest): BUILD_DIR, WORK_DIR, LIBDIR, SHARED (ON/OFF), MPIEXEC, MPIEXEC_FLAGS,
# MPI_C_COMPILER, CXX.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="$WORK_DIR/prefix"
run() { echo "+ $*"; "$@"; }
# mpiexec -n 2 with the build's flags (space-separated).
launch() { read -r -a flags <<<"${MPIEXEC_FLAGS:-}"; run "$MPIEXEC" -n 2 "${flags[@]}" "$@"; }

case "$1" in
  install)
    rm -rf "$WORK_DIR" && mkdir -p "$WORK_DIR"
    run cmake --install "$BUILD_DIR" --prefix "$WORK_DIR/staging"
    run mv "$WORK_DIR/staging" "$prefix"
    ;;
  cmake)
    dir="$WORK_DIR/cmake-${2//;/-}"
    rm -rf "$dir"
    run cmake -S "$here/consumer" -B "$dir" -DAPP_LANGUAGES="$2" -DCMAKE_PREFIX_PATH="$prefix"
    run cmake --build "$dir"
    launch "$dir/app"
    ;;
  pkgconfig)
    export PKG_CONFIG_PATH="$prefix/$LIBDIR/pkgconfig"
    static=()
    [ "$SHARED" = ON ] || static=(--static)
    libdir="$(pkg-config --variable=libdir collx)"
    # shellcheck disable=SC2046  # pkg-config's words are the flags
    run "$CXX" -o "$WORK_DIR/app-pkgconfig" "$here/consumer/main.cpp" \
      $(pkg-config "${static[@]}" --cflags --libs collx) -Wl,-rpath,"$libdir"
    launch "$WORK_DIR/app-pkgconfig"
    ;;
  dropin)
    libdir="$prefix/$LIBDIR"
    out="$WORK_DIR/dropin-$2"
    if [ "$2" = link ]; then
      # Before libmpi on the link line: the wrapper compiler puts its own -lmpi last.
      run "$MPI_C_COMPILER" -o "$out" "$here/unmodified.c" -L"$libdir" -lcollx_mpi \
        -Wl,-rpath,"$libdir"
      command=("$out")
    else
      run "$MPI_C_COMPILER" -o "$out" "$here/unmodified.c"
      # The ranks only are preloaded (env), not mpiexec.
      command=(env LD_PRELOAD="$libdir/libcollx_mpi.so" "$out")
    fi
    output="$(COLLX_PMPI_STATS=1 launch "${command[@]}" 2>&1)"
    echo "$output"
    # Both ranks' statistics at MPI_Finalize: the allreduce and the barrier went to collx.
    [ "$(grep -c "^collx_mpi rank [01]: intercepted 2," <<<"$output")" -eq 2 ]
    ;;
  *)
    echo "consumer.sh: unknown step $1" >&2
    exit 2
    ;;
esac

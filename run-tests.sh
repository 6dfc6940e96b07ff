#!/usr/bin/env bash
# The whole test suite: install, build, then every unit, simulated-rank and mpirun test.
source "$(dirname "${BASH_SOURCE[0]}")/scripts/common.sh"
collx_install_packages
collx_build
collx_mpi_env
cd "$BUILD_DIR"
exec ctest --output-on-failure -j "$(nproc)" "$@"

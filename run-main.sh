#!/usr/bin/env bash
# The main job: install what it needs, build the library and the trainer, then train an MLP on
# Fashion-MNIST on 2 ranks with collx-train (data parallel over collx's allreduce), one line per
# epoch. Extra arguments go to collx-train. (./run-tests.sh installs and builds the rest.)
source "$(dirname "${BASH_SOURCE[0]}")/scripts/common.sh"
collx_install_packages main
collx_configure
cmake --build "$BUILD_DIR" -j "$(nproc)" --target collx-train
collx_mpi_env
collx_mpirun 2 "$BUILD_DIR/apps/train/collx-train" "$@"

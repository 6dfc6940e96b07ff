#!/usr/bin/env bash
# The main job: install, build, then train an MLP on Fashion-MNIST on 2 ranks with collx-train
# (data parallel over collx's allreduce), one line per epoch. Extra arguments go to collx-train.
source "$(dirname "${BASH_SOURCE[0]}")/scripts/common.sh"
collx_install_packages
collx_install_torch
collx_build
collx_mpi_env
collx_mpirun 2 "$BUILD_DIR/apps/train/collx-train" "$@"

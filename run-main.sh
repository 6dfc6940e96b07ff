#!/usr/bin/env bash
# The main job: install, build, then compare collx's allreduce algorithms with the MPI
# library's own MPI_Allreduce on 2 ranks (float32 sum, 8 B .. 64 MiB, every result checked).
source "$(dirname "${BASH_SOURCE[0]}")/scripts/common.sh"
collx_install_packages
collx_build
collx_mpi_env
exec mpirun -np 2 --oversubscribe "$BUILD_DIR/apps/bench/collx-bench" allreduce \
  -b 8 -e 64M -f 4 -d float32 -o sum \
  -a ring,recursive_doubling,rabenseifner,auto,mpi -n 20 -w 5 -c 1 "$@"

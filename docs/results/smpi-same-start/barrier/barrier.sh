#!/usr/bin/env bash
# Usage: docs/results/smpi-same-start/barrier/barrier.sh OUTDIR (from the repository root; the
# committed JSON: OUTDIR = docs/results/smpi-same-start/barrier; SimGrid 3.32, build-smpi):
# the reduce of 16 B - 4 KiB at 256 ranks x 8 (fat tree), each
# selection's reduce and collx's binomial tree timed after the OTHER selection's barrier.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
out="$1"; mkdir -p "$out"; cd "$out"
for ((h = 0; h < 32; h++)); do echo "node-$h:8"; done > hosts_np256
run() {  # name selector barrier
  local name=$1 sel=$2 bar=$3 start=$SECONDS
  smpirun -np 256 -platform $root/smpi/platforms/fat-tree-64.xml -hostfile hosts_np256 \
    --cfg=smpi/coll-selector:$sel --cfg=smpi/barrier:$bar --cfg=smpi/simulate-computation:no \
    --cfg=smpi/host-speed:100Gf --cfg=smpi/shared-malloc-blocksize:67108864 \
    --cfg=smpi/bcast:binomial_tree \
    $root/build-smpi/apps/bench/collx-bench reduce -a binomial_tree,mpi -b 16 -e 4K -f 16 \
    -n 2 -w 1 --rounds 1 -c 1 --json $name.json > $name.log 2>&1
  grep -q "Out of bounds values : 0 OK" $name.log || { echo "wrong results: $name"; exit 1; }
  echo "$name: $((SECONDS - start)) s"
}
run reduce_np256_mpich_barrier-ompi_tree mpich ompi_tree
run reduce_np256_ompi_barrier-ompi_bruck ompi ompi_bruck

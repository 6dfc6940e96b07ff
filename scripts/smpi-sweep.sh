#!/usr/bin/env bash
# collx on SimGrid's SMPI at scale (docs/SCALE.md): collx-bench under smpirun on the platforms of
# smpi/platforms, every collx algorithm, auto, and SMPI's own collective (the mpi row) under the
# Open MPI selector (smpi/coll-selector:ompi, in the same simulation as the collx rows) and, in a
# second simulation, under the MPICH selector (-a mpi only). One --json file per simulation:
#
#   OUTDIR/<view>/<platform>/k<ranks per host>/<collective>_np<ranks>_<selector>.json
#
# and one line per simulation in OUTDIR/walltime.tsv (wall seconds, peak memory of the
# simulator). Cells whose file exists are skipped, so a sweep can be stopped and resumed, or
# extended with more ranks or platforms later.
#
#   scripts/smpi-sweep.sh OUTDIR [-c "allreduce reduce_scatter"] [-n "16 64 256 1024"]
#       [-p "fat-tree torus dragonfly"] [-k "1 8"] [-b 16] [-e 64M] [-f 4]
#       [-v network|reductions|compute]
#       [-a all,auto] [-s "ompi mpich"] [-m | -o]
#
# -m (merge): a cell whose file exists runs the -a rows alone (no mpi row, first selector only)
# and replaces those rows of the file, keeping every other row (the mpi rows, the other sizes):
# auto again after a change of the library, without simulating the MPI's collective again (a
# simulation's time is exactly repeatable, and the MPI rows do not depend on collx). The file's
# "merged" list records each such command.
#
# -o (only): each cell runs the -a rows alone under the first selector, into a file of its own
# (no mpi row; cells whose file exists are skipped): auto again after a change of the library,
# kept apart from the sweep it updates (smpi_tables.py --after takes its rows over the others).
#
# Defaults: the seven collectives (allreduce broadcast reduce allgather reduce_scatter alltoall
# barrier), 16 64 256 1024 ranks, the three platforms, 1 and 8 ranks per host, 16 B to 64 MiB by
# factors of 4, the network view. Needs the SMPI build (build-smpi; `source scripts/common.sh;
# collx_build_smpi` makes it).
#
# Views (docs/SCALE.md, "Computation"):
#   network (smpi/simulate-computation:no): only messages take simulated time, on both sides.
#   reductions (no, and every reduction charged alike): a reduction of b input bytes takes
#     b / SWEEP_REDUCE_GBPS GB/s (10 by default) of simulated time, collx's
#     (COLLX_SMPI_REDUCE_GBPS) and those inside SMPI's own collectives, which SMPI leaves free
#     (their mpi rows reduce with user-defined ops that charge it: collx-bench
#     --smpi-reduce-gbps). Copies and the rest of the code stay free on both sides.
#   compute (yes, smpi/host-speed = the platforms' 100 Gf): SMPI's own model. All of collx's
#     code between MPI calls (reductions, copies, scheduling) takes the thread CPU time it takes
#     on this machine, while every rank shares its one core (not exactly repeatable); SMPI's
#     collectives, their reductions included, stay free.
#
# Memory: 8 ranks x 64 MiB x a few buffers per rank does not fit at 256 or 1,024 ranks; sizes
# from a threshold up (COLLX_SMPI_SHARED_BYTES for collx's scratch, --smpi-shared for the bench's
# buffers: one block every rank maps, SMPI_SHARED_MALLOC) are timed, not checked. The threshold
# keeps each simulation under about 8 GiB of buffers (SWEEP_MEMORY_GIB); sizes below it are
# checked exactly.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

out="${1:?usage: smpi-sweep.sh OUTDIR [options] (options: see the header of this script)}"
shift
collectives="allreduce broadcast reduce allgather reduce_scatter alltoall barrier"
ranks="16 64 256 1024"
platforms="fat-tree torus dragonfly"
per_host="1 8"
min=16
max=64M
factor=4
view=network
algos=all,auto
selectors="ompi mpich"
merge=0
only=0
while getopts "c:n:p:k:b:e:f:v:a:s:mo" opt; do
  case "$opt" in
    c) collectives="$OPTARG" ;;
    n) ranks="$OPTARG" ;;
    p) platforms="$OPTARG" ;;
    k) per_host="$OPTARG" ;;
    b) min="$OPTARG" ;;
    e) max="$OPTARG" ;;
    f) factor="$OPTARG" ;;
    v) view="$OPTARG" ;;
    a) algos="$OPTARG" ;;
    s) selectors="$OPTARG" ;;
    m) merge=1 ;;
    o) only=1 ;;
    *) exit 2 ;;
  esac
done
charge=()
reduce_gbps=0
case "$view" in
  network) compute=no ;;
  reductions)
    compute=no reduce_gbps="${SWEEP_REDUCE_GBPS:-10}"
    charge=(--smpi-reduce-gbps "$reduce_gbps")
    ;;
  compute) compute=yes ;;
  *) echo "smpi-sweep: -v network, reductions or compute" >&2; exit 2 ;;
esac

bench="${COLLX_SMPI_BUILD_DIR:-$COLLX_ROOT/build-smpi}/apps/bench/collx-bench"
[ -x "$bench" ] || { echo "smpi-sweep: build first ($bench is missing: collx_build_smpi)" >&2; exit 1; }
platform_dir="$COLLX_ROOT/smpi/platforms"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
times="$out/walltime.tsv"
[ -f "$times" ] || printf 'view\tplatform\tper_host\tcollective\tranks\tselector\twall_s\tmax_rss_kib\n' >"$times"
memory_gib="${SWEEP_MEMORY_GIB:-8}"

# The smallest platform file with at least $1 hosts.
platform_for() {
  local name="$1" hosts="$2" n
  for n in 16 64 256 1024; do
    if [ "$n" -ge "$hosts" ]; then
      echo "$platform_dir/$name-$n.xml"
      return
    fi
  done
  echo "smpi-sweep: no $name platform of $hosts hosts" >&2
  exit 1
}

# The first size (a power of two) whose buffers are shared at $1 ranks: a rank holds about six
# buffers of a size (send, receive, expected result, scratch), and all ranks together stay under
# $memory_gib GiB (collx's scratch is shared from 4x this size: below, the results are checked). 0: none (no size up to -e is shared).
shared_from() {
  local np="$1" budget=$((memory_gib << 30)) size=1
  while [ $((size * 6 * np)) -le "$budget" ] && [ "$size" -le $((1 << 40)) ]; do
    size=$((size * 2))
  done
  echo "$size"
}

# Extra SMPI settings. Every new communicator's first broadcast (its id) runs the selected
# broadcast; under the ompi selector from 64 ranks and under mpich always, that is an SMP-aware
# one whose setup gathers the node layout with a ring allgather of p^2 messages on that
# communicator (SMPI's Comm::init_smp): minutes of the simulator's time at 1,024 ranks for each
# of the communicators collx creates. Where the measured collective's selection never calls
# SMPI's broadcast, broadcast is set to the binomial tree for the whole simulation and nothing
# measured changes: under ompi every collective but broadcast and allreduce (whose small sizes
# from 128 ranks are a reduce then a broadcast), under mpich reduce, reduce_scatter, allgather and
# alltoall (SimGrid 3.32, src/smpi/colls/smpi_{openmpi,mpich}_selector.cpp).
smpi_extra() {
  local selector="$1" collective="$2"
  case "$selector:$collective" in
    ompi:reduce | ompi:allgather | ompi:reduce_scatter | ompi:alltoall | ompi:barrier | \
      mpich:reduce | mpich:reduce_scatter | mpich:allgather | mpich:alltoall)
      echo "--cfg=smpi/bcast:binomial_tree"
      ;;
  esac
}

for platform in $platforms; do
  for k in $per_host; do
    for np in $ranks; do
      [ $((np % k)) -eq 0 ] || continue
      hosts=$((np / k))
      xml="$(platform_for "$platform" "$hosts")"
      dir="$out/$view/$platform/k$k"
      mkdir -p "$dir"
      hostfile="$dir/hosts_np$np"
      for ((h = 0; h < hosts; h++)); do echo "node-$h:$k"; done >"$hostfile"
      share="$(shared_from "$np")"
      for c in $collectives; do
        first=1
        smallest="$min"
        if [ "$c" = alltoall ]; then
          # SMPI 3.32's Bruck alltoall (ompi's choice at small sizes) fails in MPI_Pack where a
          # rank sends no element to each peer: from 4 bytes per peer, on the -b * f^k sizes.
          while [ "$(numfmt --from=iec "$smallest")" -lt $((4 * np)) ]; do
            smallest=$(($(numfmt --from=iec "$smallest") * factor))
          done
        fi
        for selector in $selectors; do
          json="$dir/${c}_np${np}_${selector}.json"
          merging=0
          if [ -s "$json" ]; then
            if [ $merge -eq 1 ] && [ $first -eq 1 ]; then
              merging=1
            else
              first=0
              continue
            fi
          fi
          rows="mpi"
          [ $first -eq 1 ] && rows="$algos,mpi"
          [ $merging -eq 1 ] && rows="$algos"
          if [ $only -eq 1 ]; then
            [ $first -eq 1 ] || continue
            rows="$algos"
          fi
          first=0
          log="${json%.json}.txt"
          # smpirun writes its temporary files into the working directory.
          start=$SECONDS
          # collx's scratch from 4x the bench's threshold: an algorithm's scratch (Bruck's
          # alltoall: 3 buffers) shared by every rank while the bench checks its result would
          # make a correct schedule fail the check.
          (cd "$dir" && COLLX_SMPI_SHARED_BYTES=$((share * 4)) \
            COLLX_SMPI_REDUCE_GBPS=$reduce_gbps /usr/bin/time -f "%M" -o "$log.rss" \
            smpirun -np "$np" -platform "$xml" -hostfile "$hostfile" \
            --cfg=smpi/coll-selector:"$selector" --cfg=smpi/simulate-computation:"$compute" \
            --cfg=smpi/host-speed:100Gf --cfg=smpi/shared-malloc-blocksize:67108864 \
            $(smpi_extra "$selector" "$c") \
            "$bench" "$c" -a "$rows" -b "$smallest" -e "$max" -f "$factor" -n 2 -w 1 --rounds 1 \
            -c 1 --smpi-shared "$share" "${charge[@]}" --json "$json.tmp") >"$log" 2>&1 || {
            echo "smpi-sweep: $log failed" >&2
            tail -5 "$log" >&2
            exit 1
          }
          grep -q "Out of bounds values : 0 OK" "$log" ||
            { echo "smpi-sweep: wrong results in $log" >&2; exit 1; }
          if [ $merging -eq 1 ]; then
            python3 - "$json" "$json.tmp" <<'MERGE'
import json, sys
old_path, new_path = sys.argv[1], sys.argv[2]
old = json.load(open(old_path))
new = json.load(open(new_path))
fresh = {(r["algo"], r["size_bytes"]) for r in new["rows"]}
kept = [r for r in old["rows"] if (r["algo"], r["size_bytes"]) not in fresh]
old["rows"] = sorted(kept + new["rows"], key=lambda r: r["size_bytes"])
old.setdefault("merged", []).append(new["command"])
json.dump(old, open(old_path, "w"), indent=2, sort_keys=True)
MERGE
            rm "$json.tmp"
          else
            mv "$json.tmp" "$json"
          fi
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$view" "$platform" "$k" "$c" "$np" \
            "$selector" $((SECONDS - start)) "$(tail -1 "$log.rss")" >>"$times"
          echo "smpi-sweep: $view $platform k$k $c np$np $selector: $((SECONDS - start)) s"
        done
      done
    done
  done
done

#!/usr/bin/env python3
"""What collx-model's network terms must predict (algorithms/cost_model.hpp), each from the
schedule's own steps on a platform of docs/SCALE.md (the fat tree: 1 us across the spine, 0.5 us
under a leaf switch of 4 hosts, 25 GB/s links; inside a host 0.2 us and 20 GB/s; no per-message
overhead, as SMPI):

    check_model.py COLLX_MODEL

Prints one line per check and exits 1 if any fails.
"""
import json
import os
import subprocess
import sys
import tempfile

FAILED = []


def predict(model, collective, nodes, per_node, sizes, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        subprocess.run([model, "-c", collective, "--nodes", str(nodes), "--ranks-per-node",
                        str(per_node), "--alpha-us", "0.2", "--bandwidth-gbps", "20",
                        "--inter-alpha-us", "1", "--inter-gbps", "25", "--gamma-gbps", "1000000",
                        "--copy-gbps", "1000000", "--sizes", ",".join(sizes), "--json", path,
                        *extra], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            doc = json.load(f)
    rows = doc["predictions"][0]["rows"]
    return {int(r["size_bytes"]): {a: t * 1e6 for a, t in r["seconds"].items()} | {"best": r["best"]}
            for r in rows}


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if not ok:
        FAILED.append(name)


def main():
    model = sys.argv[1]
    no_overhead = ("--overhead-us", "0")
    leaf = ("--switch-nodes", "4", "--switch-alpha-us", "0.5")

    # The linear broadcast's root posts its p-1 sends at once: one latency where a sender pays
    # no overhead per message, the binomial tree's log2 p levels otherwise.
    free = predict(model, "broadcast", 64, 1, ["16"], *no_overhead)[16]
    check("linear broadcast without overhead", free["best"] == "linear",
          f"best {free['best']}, linear {free['linear']:.2f} us, binomial {free['binomial_tree']:.2f} us")
    costly = predict(model, "broadcast", 64, 1, ["16"], "--overhead-us", "1")[16]
    check("binomial broadcast with 1 us per message", costly["best"] == "binomial_tree",
          f"best {costly['best']}, linear {costly['linear']:.2f} us")

    # The double binary tree's segment steps are round trips through the tree: far slower than
    # Rabenseifner at 16 MiB (the simulation: 6.7x at 16 ranks).
    big = predict(model, "allreduce", 16, 1, ["16M"], *no_overhead)[16 << 20]
    ratio = big["double_binary_tree"] / big["rabenseifner"]
    check("double binary tree's round trips", big["best"] != "double_binary_tree" and ratio > 4,
          f"best {big['best']}, double_binary_tree / rabenseifner {ratio:.1f}")

    # The leaf switch: recursive doubling on 16 hosts pays 0.5 us for its two steps under a leaf
    # and 1 us for the two across the spine (the simulation: 3.01 us).
    rd = predict(model, "allreduce", 16, 1, ["16"], *no_overhead, *leaf)[16]["recursive_doubling"]
    check("switch tier", abs(rd - 3.0) < 0.01, f"recursive doubling at 16 B {rd:.3f} us")

    # 8 ranks per host: recursive doubling's first three steps stay in the host (0.2 us each), so
    # it beats the node-aware form at 16 B (the simulation: 1.12 against 1.72 us).
    small = predict(model, "allreduce", 2, 8, ["16"], *no_overhead, *leaf)[16]
    check("loopback steps", small["best"] == "recursive_doubling" and
          abs(small["recursive_doubling"] - 1.1) < 0.05,
          f"best {small['best']}, recursive doubling {small['recursive_doubling']:.2f} us")

    # Link contention: recursive halving pairs far first, so all 8 ranks of a host send halves
    # of the buffer through its one link; Rabenseifner's allreduce pairs near first.
    far = predict(model, "reduce_scatter", 8, 8, ["16M"], *no_overhead, *leaf)[16 << 20]
    check("far-first halving through one link", far["recursive_halving"] > 4 * far["hierarchical"],
          f"recursive_halving {far['recursive_halving']:.0f} us, hierarchical "
          f"{far['hierarchical']:.0f} us (the simulation: 4744 and 782)")
    near = predict(model, "allreduce", 8, 8, ["16M"], *no_overhead, *leaf)[16 << 20]
    check("near-first Rabenseifner", abs(near["rabenseifner"] / 2101 - 1) < 0.1,
          f"rabenseifner {near['rabenseifner']:.0f} us (the simulation: 2101)")

    # The loopback moves each message in flight at its full bandwidth: multi_leader's rings
    # inside the host and its blocks side by side across (the simulation: 858 us, the best).
    ml = predict(model, "allreduce", 2, 8, ["16M"], *no_overhead, *leaf)[16 << 20]
    check("multi_leader at 16 MiB, 2 x 8", ml["best"] == "multi_leader",
          f"best {ml['best']}, multi_leader {ml['multi_leader']:.0f} us")

    # The bench's start (--start dissemination, --calls 2): 64 ranks on 8 hosts x 8 leave Bruck's
    # barrier 3.4 us apart (rank 0 last: 0.8 us a round for the three rounds that cross a host
    # for it and stay inside one for most, 0.5 us for the two under a leaf), and the first rank
    # out waits for rank 0 in recursive doubling: 3.4 / 2 us a call more (the simulation: 4.34
    # us). The binomial reduce's root starts last and finds its subtrees done but for the hop
    # from rank 32 (1 us) after rank 48's into it (0.5 us): its first call 1.5 us where the
    # tree's path is 2.6, then a period of 1 us (the simulation: 1.26 us a call).
    staggered = ("--calls", "2", "--start", "dissemination")
    rd8 = predict(model, "allreduce", 8, 8, ["16"], *no_overhead, *leaf, *staggered)[16]
    check("barrier's spread, recursive doubling", abs(rd8["recursive_doubling"] - 4.32) < 0.02,
          f"recursive doubling at 16 B {rd8['recursive_doubling']:.3f} us")
    red8 = predict(model, "reduce", 8, 8, ["16"], *no_overhead, *leaf, *staggered)[16]
    check("barrier's spread, binomial reduce", abs(red8["binomial_tree"] - 1.25) < 0.02,
          f"binomial reduce at 16 B {red8['binomial_tree']:.3f} us")

    # The hierarchical broadcast of 1 MiB (4 segments) on 2 hosts x 8, calls back to back: a
    # head starts the next call once its sends across and inside its node are done, 56 us, not
    # the whole call (the simulation: 69.06 us a call; the model's node tree is a segment time
    # over, docs/SCALE.md).
    hb = predict(model, "broadcast", 2, 8, ["1M"], *no_overhead, *leaf, "--calls", "2")[1 << 20]
    check("hierarchical broadcast, calls back to back", abs(hb["hierarchical"] / 69.06 - 1) < 0.12,
          f"hierarchical at 1 MiB {hb['hierarchical']:.2f} us")

    # The pipelines across 8 hosts x 8: a node segment's phases inside a host are the butterfly's
    # and recursive doubling's steps of that node segment, each over its own segments in flight
    # (not the whole buffer's): multi_leader at 4 MiB is held by them, hierarchical
    # reduce_scatter at 16 MiB by the link (the simulation: 449.11 and 630.95 us a call).
    ml8 = predict(model, "allreduce", 8, 8, ["4M"], *no_overhead, *leaf, "--calls", "2")[4 << 20]
    check("multi_leader's node phases, 8 x 8", abs(ml8["multi_leader"] / 449.11 - 1) < 0.1,
          f"multi_leader at 4 MiB {ml8['multi_leader']:.1f} us")
    rs8 = predict(model, "reduce_scatter", 8, 8, ["16M"], *no_overhead, *leaf,
                  "--calls", "2")[16 << 20]
    check("hierarchical reduce_scatter's node phases, 8 x 8",
          abs(rs8["hierarchical"] / 630.95 - 1) < 0.1,
          f"hierarchical at 16 MiB {rs8['hierarchical']:.1f} us")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

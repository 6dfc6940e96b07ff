#!/usr/bin/env python3
"""Auto's decision table from measurements: reads collx-bench --json runs (any collectives and
rank counts), takes per collective, rank count and size the collx algorithm with the lowest
median time, merges neighbouring sizes with the same winner, and prints the rows as C++
initialisers for lib/src/selector.cpp.

    scripts/selector_rows.py /tmp/sweep/*.json --ranks 2=1-2,3=3,4=4,5=5-7,8=8-

A winner within --keep (default 3%) of the previous size's winner keeps the previous algorithm,
so noise does not make the table flap between equal algorithms.
"""
import argparse
import collections
import json
import statistics


def parse_ranks(text):
    out = {}
    for item in text.split(","):
        np_, span = item.split("=")
        lo, _, hi = span.partition("-")
        out[int(np_)] = (int(lo), int(hi) if hi else None, "-" in span)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--ranks", default="2=1-2,3=3,4=4,5=5-7,8=8-")
    parser.add_argument("--keep", type=float, default=0.03)
    args = parser.parse_args()
    ranks = parse_ranks(args.ranks)

    times = collections.defaultdict(list)  # (collective, np, size, algo) -> [us]
    for path in args.files:
        doc = json.load(open(path))
        for row in doc["rows"]:
            if row["algo"] in ("mpi", "memcpy") or row["algo"].startswith("auto"):
                continue
            times[(doc["collective"], doc["nranks"], row["size_bytes"], row["algo"])].append(
                row["time_us"])

    table = collections.defaultdict(dict)  # (collective, np) -> size -> {algo: median}
    for (c, np_, size, algo), v in times.items():
        table[(c, np_)].setdefault(size, {})[algo] = statistics.median(v)

    for (c, np_) in sorted(table):
        if np_ not in ranks:
            continue
        lo, hi, open_ended = ranks[np_]
        hi_text = "kAnyRanks" if open_ended and hi is None else str(hi if hi is not None else lo)
        sizes = sorted(table[(c, np_)])
        winners = []
        previous = None
        for size in sizes:
            medians = table[(c, np_)][size]
            best = min(medians, key=medians.get)
            if previous in medians and medians[previous] <= medians[best] * (1 + args.keep):
                best = previous
            winners.append((size, best))
            previous = best
        # One row per run of equal winners, up to the last size of the run.
        rows = []
        for i, (size, algo) in enumerate(winners):
            if i + 1 < len(winners) and winners[i + 1][1] == algo:
                continue
            last = i + 1 == len(winners)
            rows.append(("kAnyBytes" if last else str(size), algo))
        print(f"    // {c}, measured at {np_} ranks")
        for bound, algo in rows:
            print(f"    {{Collective::{c}, {lo}, {hi_text}, {bound}, Algorithm::{algo}}},")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Issue 4's goal table from a perf-sweep directory: for each collective and rank count, auto's
ratio to the mpi row (mpi time / auto time) at every size in a range, the median over the runs,
the lowest of those medians, and whether it reaches the goal.

    scripts/goal_table.py /tmp/sweep "allreduce:2:1M:64M:1.3" "broadcast:4:1M:64M:1.1" ...

Each goal is collective:np:from:to:ratio; the directory holds perf-sweep.sh's
<collective>_np<np>_r<run>.json files.
"""
import glob
import json
import statistics
import sys


def size_of(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main():
    directory, goals = sys.argv[1], sys.argv[2:]
    print("| goal | sizes | median auto/mpi per size (runs) | min | met |")
    print("|---|---|---|---|---|")
    for goal in goals:
        collective, np_, lo, hi, target = goal.split(":")
        lo, hi, target = size_of(lo), size_of(hi), float(target)
        ratios = {}
        files = sorted(glob.glob(f"{directory}/{collective}_np{np_}_r*.json"))
        for path in files:
            rows = json.load(open(path))["rows"]
            mpi = {r["size_bytes"]: r["time_us"] for r in rows if r["algo"] == "mpi"}
            for r in rows:
                size = r["size_bytes"]
                if r["algo"] == "auto" and lo <= size <= hi and r["time_us"] > 0:
                    ratios.setdefault(size, []).append(mpi[size] / r["time_us"])
        medians = {s: statistics.median(v) for s, v in sorted(ratios.items())}
        low = min(medians.values())
        cells = ", ".join(f"{human(s)}: {m:.2f}" for s, m in medians.items())
        print(f"| {collective} np={np_} >= {target}x | {human(lo)} .. {human(hi)} | {cells} "
              f"({len(files)}) | {low:.2f} | {'yes' if low >= target else 'no'} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A goal table from a perf-sweep directory: for each collective and rank count, auto's ratio to
a reference row at every size in a range, each run's and their median, the lowest median, and
whether it reaches the goal; then, per goal, a table of every size with each run's ratio, the
memcpy row's bandwidth (where the run has one) and what auto ran, under a row of each run's cache
line round trip between the two ranks' cores (collx-bench's probe at the start and end of each of
the run's files: on a virtual machine the two virtual CPUs may be near or far, docs/AUTO.md).

    scripts/goal_table.py /tmp/sweep "allreduce:2:1M:64M:1.5" "allreduce:2:1M:64M:2.0:memcpy" ...
    scripts/goal_table.py /tmp/small,/tmp/large ...     (run k of each directory together)

Each goal is collective:np:from:to:ratio[:reference]. Reference `mpi` (the default): the goal is
mpi time / auto time >= ratio (auto's busbw over the MPI library's). Reference `memcpy`: the
goal is auto time / memcpy time <= ratio (auto's time as a multiple of one local copy of the
result). The directories hold perf-sweep.sh's <collective>_np<np>_r<run>.json files.

Where the files carry the probe, each goal has a second line: the same goal over the runs whose
round trips all stayed below NEAR_NS (200 ns; GOAL_NEAR_NS), the VM's near state, where the
shared-memory algorithms run at their speed (docs/AUTO.md, "Two states of the VM").
"""
import glob
import json
import os
import re
import statistics
import sys


NEAR_NS = float(os.environ.get("GOAL_NEAR_NS", "200"))


def size_of(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def run_number(path):
    return int(re.search(r"_r(\d+)\.json$", path).group(1))


def main():
    directory, goals = sys.argv[1], sys.argv[2:]
    details = []
    print("| goal | sizes | median per size (runs) | worst | met |")
    print("|---|---|---|---|---|")
    for goal in goals:
        fields = goal.split(":")
        collective, np_, lo, hi, target = fields[:5]
        reference = fields[5] if len(fields) > 5 else "mpi"
        lo, hi, target = size_of(lo), size_of(hi), float(target)
        # Run k of every directory together (a sweep of small sizes and one of large ones).
        runs, round_trips = {}, {}
        for d in directory.split(","):
            for path in glob.glob(f"{d}/{collective}_np{np_}_r*.json"):
                doc = json.load(open(path))
                runs.setdefault(run_number(path), []).extend(doc["rows"])
                round_trips.setdefault(run_number(path), []).extend(
                    doc[key] for key in ("round_trip_start_ns", "round_trip_end_ns") if key in doc)
        ratios, memcpy_gbps, choices = {}, {}, {}
        for k in sorted(runs):
            rows = runs[k]
            ref = {r["size_bytes"]: r["time_us"] for r in rows if r["algo"] == reference}
            for r in rows:
                size = r["size_bytes"]
                if r["algo"] == "memcpy":
                    memcpy_gbps.setdefault(size, []).append(r["algbw_gbps"])
                if r["algo"] != "auto" or not lo <= size <= hi or r["time_us"] <= 0:
                    continue
                ratio = (ref[size] / r["time_us"] if reference == "mpi"
                         else r["time_us"] / ref[size])
                ratios.setdefault(size, []).append(ratio)
                choices.setdefault(size, set()).add(r.get("selected", "?"))
        medians = {s: statistics.median(v) for s, v in sorted(ratios.items())}
        at_most = reference == "memcpy"
        name = (f"{collective} np={np_} auto <= {target}x memcpy" if at_most
                else f"{collective} np={np_} auto >= {target}x {reference}")
        trips = [round_trips.get(k, []) for k in sorted(runs)]

        def line(label, meds, count):
            worst = max(meds.values()) if at_most else min(meds.values())
            met = worst <= target if at_most else worst >= target
            cells = ", ".join(f"{human(s)}: {m:.2f}" for s, m in meds.items())
            print(f"| {label} | {human(lo)} .. {human(hi)} | {cells} ({count}) | {worst:.2f} "
                  f"| {'yes' if met else 'no'} |")

        line(name, medians, len(runs))
        near = [i for i, t in enumerate(trips) if t and max(t) < NEAR_NS]
        if any(trips) and near:
            near_medians = {s: statistics.median([v[i] for i in near if i < len(v)])
                            for s, v in sorted(ratios.items())}
            line(f"{name}, near-state runs ({', '.join(str(i + 1) for i in near)})",
                 near_medians, len(near))
        details.append((name, ratios, medians, memcpy_gbps, choices, len(runs), at_most, target,
                        trips))
    for name, ratios, medians, memcpy_gbps, choices, runs, at_most, target, trips in details:
        print(f"\n#### {name}\n")
        head = " | ".join(f"run {k + 1}" for k in range(runs))
        print(f"| size | {head} | median | memcpy GB/s | auto ran |")
        print("|---|" + "---|" * runs + "---|---|---|")
        if any(trips):
            cells = " | ".join(f"{min(t):.0f}-{max(t):.0f}" if t else "" for t in trips)
            print(f"| core round trip (ns) | {cells} | | | |")
        for size, values in sorted(ratios.items()):
            m = medians[size]
            miss = (m > target) if at_most else (m < target)
            gbps = (f"{statistics.median(memcpy_gbps[size]):.1f}"
                    if size in memcpy_gbps else "")
            cells = " | ".join(f"{v:.2f}" for v in values)
            print(f"| {human(size)} | {cells} | {m:.2f}{' **miss**' if miss else ''} | {gbps} "
                  f"| {', '.join(sorted(choices[size]))} |")


if __name__ == "__main__":
    main()

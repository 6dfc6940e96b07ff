#!/usr/bin/env python3
"""Summarise repeated collx-bench --json runs: per size and algorithm, the median time over the
runs and the median of the per-run ratios to the mpi row (busbw ratio = mpi time / time).

    scripts/bench_summary.py run1.json run2.json ... [--algos auto,ring] [--markdown]
"""
import argparse
import collections
import json
import statistics


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--algos", default="", help="comma-separated algorithms to show")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()

    times = collections.defaultdict(list)   # (size, algo) -> [time_us]
    ratios = collections.defaultdict(list)  # (size, algo) -> [mpi_time / time]
    selected = {}
    header = None
    for path in args.files:
        doc = json.load(open(path))
        header = header or doc
        by_size = collections.defaultdict(dict)
        for row in doc["rows"]:
            by_size[row["size_bytes"]][row["algo"]] = row
            if "selected" in row:
                selected[row["size_bytes"]] = row["selected"]
        for size, rows in by_size.items():
            mpi = rows.get("mpi")
            for algo, row in rows.items():
                times[(size, algo)].append(row["time_us"])
                if mpi and algo != "mpi" and row["time_us"] > 0:
                    ratios[(size, algo)].append(mpi["time_us"] / row["time_us"])

    algos = [a for a in args.algos.split(",") if a] or sorted({a for _, a in times})
    sizes = sorted({s for s, _ in times})
    print(f"# {header['collective']}, {header['nranks']} ranks, {len(args.files)} runs, "
          f"{header['mpi_library']}")
    cols = ["size(B)"] + [f"{a} us" for a in algos] + [f"{a}/mpi" for a in algos if a != "mpi"]
    if args.markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    else:
        print("  ".join(f"{c:>14}" for c in cols))
    for size in sizes:
        cells = [str(size)]
        for a in algos:
            v = times.get((size, a))
            cells.append(f"{statistics.median(v):.2f}" if v else "-")
        for a in algos:
            if a == "mpi":
                continue
            v = ratios.get((size, a))
            label = f"{statistics.median(v):.2f}" if v else "-"
            if a == "auto" and size in selected:
                label += f" ({selected[size]})"
            cells.append(label)
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()

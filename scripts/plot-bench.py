#!/usr/bin/env python3
"""Plot collx-bench --json output: busbw against message size, one line per algorithm and the
MPI library's own collective (the mpi row), as a PNG made by gnuplot.

    scripts/plot-bench.py out.json [more.json ...] -o plot.png [--time]

Several files (repeated runs) are combined by taking the median per size and algorithm.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="collx-bench --json files")
    parser.add_argument("-o", "--output", required=True, help="PNG file to write")
    parser.add_argument("--time", action="store_true", help="plot time (us) instead of busbw")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()

    values = collections.defaultdict(list)  # (algo, size) -> [value]
    header = None
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        header = header or doc
        for row in doc["rows"]:
            value = row["time_us"] if args.time else row["busbw_gbps"]
            values[(row["algo"], row["size_bytes"])].append(value)
    if not values:
        sys.exit("no rows in the input")
    algos = []
    for algo, _ in values:
        if algo not in algos:
            algos.append(algo)
    # The mpi row last, drawn black and dashed, so it reads as the reference.
    algos = [a for a in algos if a != "mpi"] + [a for a in algos if a == "mpi"]

    title = args.title or (f"collx {header['collective']}, {header['nranks']} ranks "
                           f"({len(args.files)} run{'s' if len(args.files) > 1 else ''}, median)")
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for i, algo in enumerate(algos):
            data = os.path.join(tmp, f"{i}.dat")
            with open(data, "w") as out:
                for (a, size), v in sorted(values.items(), key=lambda kv: kv[0][1]):
                    if a == algo and size > 0:
                        out.write(f"{size} {statistics.median(v)}\n")
            style = ("lw 3 dt 2 lc rgb 'black'" if algo == "mpi" else "lw 2")
            label = "MPI library" if algo == "mpi" else algo
            plots.append(f"'{data}' using 1:2 with linespoints {style} title '{label}'")
        script = os.path.join(tmp, "plot.gp")
        with open(script, "w") as gp:
            gp.write("set terminal pngcairo size 1100,700 noenhanced font 'sans,11'\n")
            gp.write(f"set output '{os.path.abspath(args.output)}'\n")
            gp.write(f"set title \"{title}\"\n")
            gp.write("set logscale x 2\nset format x '%.0b%B'\n")
            gp.write("set xlabel 'message size (bytes)'\n")
            if args.time:
                gp.write("set logscale y 10\nset ylabel 'time (us)'\n")
            else:
                gp.write("set ylabel 'busbw (GB/s)'\n")
            gp.write("set grid\nset key top left\n")
            gp.write("plot " + ", ".join(plots) + "\n")
        subprocess.run(["gnuplot", script], check=True)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

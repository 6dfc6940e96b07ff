#!/usr/bin/env python3
"""The cost model's ranking of the algorithms against collx-bench's, size by size.

    scripts/model-vs-bench.py MODEL_JSON BENCH_JSON [BENCH_JSON ...]

MODEL_JSON: `collx-model ... --sizes ... --json FILE` for the layout the bench ran on (its one
prediction of the bench's collective and rank count is used). BENCH_JSON: `collx-bench ... -a all
--json FILE` runs of that collective (several runs: each algorithm's median time per size).
Rows that are not one algorithm (auto, mpi) are left out, as are sizes the model did not predict.

Prints a markdown table, one row per size: the measured order, the predicted order, Spearman's
rank correlation between them, whether the predicted fastest is the measured fastest, and how
much slower the predicted fastest ran than the measured fastest ("regret": what auto would lose
by following the model). Exits 2 on unusable input.
"""
import json
import statistics
import sys


def spearman(a, b):
    """Rank correlation of two orderings of the same items (no ties)."""
    n = len(a)
    if n < 2:
        return 1.0
    pos_b = {x: i for i, x in enumerate(b)}
    d2 = sum((i - pos_b[x]) ** 2 for i, x in enumerate(a))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def human(size):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}"
        size /= 1024


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        model = json.load(f)
    times = {}  # (size, algorithm) -> [us]
    collective = ranks = None
    for path in argv[2:]:
        with open(path) as f:
            bench = json.load(f)
        if collective is None:
            collective, ranks = bench["collective"], bench["nranks"]
        elif (bench["collective"], bench["nranks"]) != (collective, ranks):
            print(f"{path}: another collective or rank count", file=sys.stderr)
            return 2
        for row in bench["rows"]:
            algo = row["algo"].split("@")[0]
            if algo.startswith("auto") or algo == "mpi":
                continue
            if row.get("wrong", 0) != 0:
                print(f"{path}: {algo} at {row['size_bytes']} B has wrong results", file=sys.stderr)
                return 2
            times.setdefault((row["size_bytes"], algo), []).append(row["time_us"])
    prediction = next((p for p in model["predictions"]
                       if p["collective"] == collective and p["ranks"] == ranks), None)
    if prediction is None:
        print(f"{argv[1]}: no prediction of {collective} at {ranks} ranks", file=sys.stderr)
        return 2
    print(f"{collective}, {ranks} ranks on {prediction['nodes']} node(s); "
          f"{len(argv) - 2} bench run(s), medians")
    print()
    print("| size | measured, fastest first | predicted, fastest first | Spearman | "
          "predicted fastest = measured fastest | regret |")
    print("|---|---|---|---|---|---|")
    rhos, hits, rows = [], 0, 0
    for row in prediction["rows"]:
        size = int(row["size_bytes"])
        measured = {a: statistics.median(t) for (s, a), t in times.items() if s == size}
        common = [a for a in measured if a in row["seconds"]]
        if len(common) < 2:
            continue
        by_time = sorted(common, key=lambda a: measured[a])
        by_model = sorted(common, key=lambda a: row["seconds"][a])
        rho = spearman(by_time, by_model)
        hit = by_time[0] == by_model[0]
        regret = measured[by_model[0]] / measured[by_time[0]]
        rhos.append(rho)
        hits += hit
        rows += 1
        print(f"| {human(size)} | {', '.join(by_time)} | {', '.join(by_model)} | {rho:.2f} | "
              f"{'yes' if hit else 'no'} | {regret:.2f}x |")
    if rows == 0:
        print("no size both measured and predicted", file=sys.stderr)
        return 2
    print()
    print(f"median Spearman {statistics.median(rhos):.2f}; fastest predicted at {hits} of {rows} sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

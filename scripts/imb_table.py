#!/usr/bin/env python3
"""Tables of scripts/imb-dropin.sh's runs: per IMB benchmark and rank count, each size's median
t_avg with the MPI library alone and with libcollx_mpi preloaded, and the median of the per-run
ratios native / drop-in (above 1: the drop-in is faster); where the runs have a native_again
side (the MPI library alone once more), the median of the per-run ratios native / native_again:
the noise between two identical runs.

    imb_table.py OUTDIR [--csv]   (reads OUTDIR/{native,dropin,native_again}_np<N>_r<R>.txt,
                                   writes markdown, or with --csv the rows of a docs/results file:
                                   benchmark,np,bytes,native_us,dropin_us,native_over_dropin,
                                   native_over_again (empty without native_again runs))
"""
import glob
import os
import re
import statistics
import sys


def parse(path):
    """{benchmark: {bytes: t_avg_us}} of one IMB-MPI1 output."""
    out, bench = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"#\s*Benchmarking\s+(\S+)", line)
            if m:
                bench = m.group(1)
                out.setdefault(bench, {})
                continue
            fields = line.split()
            if bench is None or not fields or not re.match(r"^\d", fields[0]):
                continue
            if bench == "Barrier" and len(fields) == 4:  # #repetitions t_min t_max t_avg
                out[bench][0] = float(fields[3])
            elif len(fields) >= 5:  # #bytes #repetitions t_min t_max t_avg
                out[bench][int(fields[0])] = float(fields[4])
    return out


def main():
    root = sys.argv[1]
    as_csv = "--csv" in sys.argv[2:]
    runs = {}
    for path in glob.glob(os.path.join(root, "*_np*_r*.txt")):
        m = re.match(r"(native_again|native|dropin)_np(\d+)_r(\d+)\.txt", os.path.basename(path))
        if m:
            runs[(m.group(1), int(m.group(2)), int(m.group(3)))] = parse(path)
    nps = sorted({k[1] for k in runs})
    rs = sorted({k[2] for k in runs})
    if as_csv:
        print("benchmark,np,bytes,native_us,dropin_us,native_over_dropin,native_over_again")
    else:
        with open(os.path.join(root, "machine.txt")) as f:
            print(f.read().rstrip())
    below = []
    for np_ in nps:
        benches = sorted({b for (s, n, r), d in runs.items() if n == np_ for b in d})
        for bench in benches:
            if not as_csv:
                print(f"\n### {bench}, np={np_}\n")
                print("| bytes | native t_avg (us) | drop-in t_avg (us) | native / drop-in "
                      "| native / native again |")
                print("| ---: | ---: | ---: | ---: | ---: |")
            sizes = sorted({b for (s, n, r), d in runs.items() if n == np_ for b in d.get(bench, {})})
            for size in sizes:
                nat = [runs[("native", np_, r)][bench][size] for r in rs
                       if size in runs.get(("native", np_, r), {}).get(bench, {})]
                dro = [runs[("dropin", np_, r)][bench][size] for r in rs
                       if size in runs.get(("dropin", np_, r), {}).get(bench, {})]
                ratios = [runs[("native", np_, r)][bench][size] / runs[("dropin", np_, r)][bench][size]
                          for r in rs
                          if size in runs.get(("native", np_, r), {}).get(bench, {})
                          and size in runs.get(("dropin", np_, r), {}).get(bench, {})
                          and runs[("dropin", np_, r)][bench][size] > 0]
                if not nat or not dro or not ratios:
                    continue
                again = [runs[("native", np_, r)][bench][size]
                         / runs[("native_again", np_, r)][bench][size]
                         for r in rs
                         if size in runs.get(("native", np_, r), {}).get(bench, {})
                         and runs.get(("native_again", np_, r), {}).get(bench, {}).get(size, 0) > 0]
                again_text = f"{statistics.median(again):.2f}" if again else ""
                ratio = statistics.median(ratios)
                if ratio < 1.0:
                    below.append(f"{bench} np={np_} {size} B: {ratio:.2f}")
                if as_csv:
                    print(f"{bench},{np_},{size},{statistics.median(nat):.2f},"
                          f"{statistics.median(dro):.2f},{ratio:.2f},{again_text}")
                else:
                    print(f"| {size} | {statistics.median(nat):.2f} | {statistics.median(dro):.2f} "
                          f"| {ratio:.2f} | {again_text} |")
    if not as_csv:
        print(f"\nCells below 1.0 ({len(below)}): " + ("; ".join(below) if below else "none"))


if __name__ == "__main__":
    main()

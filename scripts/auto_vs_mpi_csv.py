#!/usr/bin/env python3
"""A result file (docs/results/, scripts/doc_tables.py's format) from an auto-vs-mpi.sh run.

    scripts/auto_vs_mpi_csv.py OUTDIR --title T --machine M --mpi M --measured M --commit C \
        --command C [--note N] > docs/results/NAME.csv

Reads OUTDIR/small/*.json and OUTDIR/large/*.json (collx-bench --json, -a auto,mpi, RUNS runs of
each collective and rank count) and writes one row per collective, rank count and size: the
median over the runs of auto's time and of the MPI library's, the median of the per-run ratios
(mpi time / auto time: above 1, auto is faster), the algorithms auto ran in the runs, and the
median of what auto's first calls of the size cost (the warm-up and the trials: first_calls,
first_calls_us). Where the runs had the `mpi_again` row (the MPI library's call again, as a row
of its own, timed in the same rounds), mpi_over_again is the median of the per-run ratios of the
MPI's time over that row's: what two identical calls differ by, the noise a cell's mpi_over_auto
is read against (empty where the runs had no such row).
"""
import argparse
import csv
import glob
import json
import os
import statistics
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('outdir')
    for key in ('title', 'machine', 'mpi', 'measured', 'commit', 'command', 'note'):
        parser.add_argument('--' + key, action='append', default=[])
    args = parser.parse_args()
    cells = {}
    for path in sorted(glob.glob(os.path.join(args.outdir, '*', '*_r*.json'))):
        with open(path) as f:
            run = json.load(f)
        rows = {}
        for row in run['rows']:
            rows.setdefault(row['size_bytes'], {})[row['algo']] = row
        for size, algos in rows.items():
            if 'auto' not in algos or 'mpi' not in algos:
                continue
            key = (run['collective'], run['nranks'], size)
            cells.setdefault(key, []).append((algos['auto'], algos['mpi'], algos.get('mpi_again')))
    out = sys.stdout
    for key in ('title', 'machine', 'mpi', 'measured', 'commit', 'command', 'note'):
        for value in getattr(args, key):
            out.write(f'# {key}: {value}\n')
    writer = csv.writer(out, lineterminator='\n')
    writer.writerow(['collective', 'np', 'bytes', 'runs', 'auto_us', 'mpi_us', 'mpi_over_auto',
                     'auto_ran', 'first_calls', 'first_calls_us', 'mpi_over_again'])
    order = ['allreduce', 'broadcast', 'reduce', 'allgather', 'reduce_scatter', 'gather',
             'scatter', 'alltoall', 'barrier']
    for key in sorted(cells, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1],
                                            k[2])):
        runs = cells[key]
        auto_us = statistics.median(a['time_us'] for a, _, _ in runs)
        mpi_us = statistics.median(m['time_us'] for _, m, _ in runs)
        ratio = statistics.median(m['time_us'] / a['time_us'] if a['time_us'] > 0 else 0
                                  for a, m, _ in runs)
        again = [m['time_us'] / g['time_us'] for _, m, g in runs if g and g['time_us'] > 0]
        again_text = f'{statistics.median(again):.2f}' if again else ''
        ran = sorted({a.get('selected', '') for a, _, _ in runs})
        first_calls = statistics.median(a.get('first_calls', 0) for a, _, _ in runs)
        first_us = statistics.median(a.get('first_calls_us', 0) for a, _, _ in runs)
        writer.writerow([key[0], key[1], key[2], len(runs), f'{auto_us:.2f}', f'{mpi_us:.2f}',
                         f'{ratio:.2f}', '+'.join(ran), f'{first_calls:.0f}', f'{first_us:.2f}',
                         again_text])


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Tables (markdown), goal checks and plots (SVG) from a scripts/smpi-sweep.sh directory
(docs/SCALE.md).

    scripts/smpi_tables.py SWEEP_DIR [--after LATER_SWEEP_DIR] [--view network] [--plots DIR]
        [--model COLLX_MODEL] [--goals] [--walltime] [--walltime-list]

A cell is one collective, size, rank count, platform and ranks per host. In each cell, "MPI" is
SMPI's Open MPI (ompi) and MPICH (mpich) selections, and auto's ratio is MPI's time over auto's
(above 1: auto is faster), the lower of the two selections' (--pairing). Tables: one per platform and ranks per host, one row per
collective and size, one column per rank count: auto's ratio and what auto ran.

--goals: the issue's goals, cell by cell: auto >= 1.0x MPI everywhere; auto >= 1.3x MPI for
allreduce and reduce_scatter from 1 MiB at 256 ranks and more with 8 ranks per host.
--pairing same-start|sweep: which auto row meets each selection's row. same-start (the default):
each selection against auto's row from its own simulation (collx-bench -a auto,mpi under that
selection: both timed after that selection's barrier) where one exists, else auto's row from Open
MPI's simulation; sweep: auto's row from Open MPI's simulation against the faster selection.
--goals prints goal 1 under both.
--model COLLX_MODEL: collx-model's predictions for every cell (collx-model --nodes N
--ranks-per-node K --calls 2 --start, the platform's latency and bandwidth, the bench's two calls
back to back after its barrier; no computation in the network view),
against the simulation: whether the model's fastest algorithm is the simulation's fastest (or
within 5 % of it), Spearman's rank correlation of the two orders, and the model's time for the
algorithm auto ran against the simulated time (within 25 %?).
--plots DIR: one SVG per collective and platform: auto's ratio against size, a line per rank
count and ranks per host.
--walltime: the simulator's wall time and memory (walltime.tsv of the sweep and each --after
sweep), summed up per view, platform, ranks per host and rank count; --walltime-list: every
simulation, one row each.
--views DIR: the three views of computation side by side (docs/SCALE.md, "Computation"), for
the cells DIR holds under reductions/ and compute/ (scripts/smpi-sweep.sh -v): auto and Open
MPI's selection in the network view (SWEEP_DIR, with --after), in the reductions view and in
the compute view, and auto's speed over MPI (MPI's time over auto's) in each.
"""
import argparse
import collections
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

COLLECTIVES = ["allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall",
               "barrier"]

# What collx-model is told about each platform (smpi/make-platforms.py): the latency of one
# message between two hosts (the links of a typical route: fat tree across a spine, 4 x 0.25 us;
# torus, the mean hop count of its dimensions x 0.25 us; dragonfly, 3-5 links x 0.2 us: 4), the
# bandwidth of a host's link (GB/s), and inside a host the loopback (0.2 us, 20 GB/s). SMPI
# charges no per-message overhead at a sender (smpi/os, smpi/ois: 0): --overhead-us 0.
TORUS_DIMS = {16: (4, 2, 2), 64: (4, 4, 4), 256: (8, 8, 4), 1024: (16, 8, 8)}


def platform_size(hosts):
    return next(n for n in (16, 64, 256, 1024) if n >= hosts)


def network_of(platform, hosts):
    if platform == "fat-tree":
        # A job whose hosts share one leaf switch (sqrt(N) hosts of the smallest file that has
        # them) never crosses a spine: 2 links, 0.5 us.
        leaf = int(math.isqrt(platform_size(hosts)))
        return (0.5 if hosts <= leaf else 1.0), 25.0
    if platform == "torus":
        dims = TORUS_DIMS[platform_size(hosts)]
        return 0.25 * sum(d / 4 for d in dims), 12.5
    if platform == "dragonfly":
        return 0.8, 25.0
    raise ValueError(platform)


def switch_of(platform, hosts):
    """collx-model's options for the tier under the network's latency: a fat tree's leaf
    switch (sqrt(N) consecutive hosts, 2 links: 0.5 us between two of them)."""
    if platform == "fat-tree":
        return ["--switch-nodes", str(int(math.isqrt(platform_size(hosts)))),
                "--switch-alpha-us", "0.5"]
    return []


def start_of(np):
    """collx-model's --start for the bench's barrier (collx-bench runs the rows of collx under
    SMPI's Open MPI selection): SimGrid 3.32's Open MPI selection takes Bruck's dissemination
    barrier for 64 to 255 and 512 to 1,023 ranks, which releases the ranks apart (rank 0 last),
    recursive doubling below 64 ranks (all at once), a tree for 256 to 511 and 1,024 to 4,095
    (not modelled: no cell of the check has them)."""
    return "dissemination" if 64 <= np < 256 or 512 <= np < 1024 else "together"


def human(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def load(sweep, view):
    """cells[(platform, k, collective, np)][size] = {algo: us, "auto": us, "auto_sel": name,
    "ompi": us, "mpich": us}"""
    cells = collections.defaultdict(lambda: collections.defaultdict(dict))
    for path in glob.glob(os.path.join(sweep, view, "*", "k*", "*.json")):
        platform = path.split(os.sep)[-3]
        k = int(path.split(os.sep)[-2][1:])
        m = re.match(r"(.+)_np(\d+)_(\w+)\.json$", os.path.basename(path))
        collective, np, selector = m.group(1), int(m.group(2)), m.group(3)
        with open(path) as f:
            doc = json.load(f)
        for row in doc["rows"]:
            size = row["size_bytes"]
            # -b below one element per rank: the bench runs zero elements (a barrier's only size).
            if size == 0 and collective != "barrier":
                continue
            cell = cells[(platform, k, collective, np)][size]
            algo = row["algo"]
            if algo == "mpi":
                cell[selector] = row["time_us"]
            elif algo == "auto":
                # Kept per selection: the simulation under a selection times auto after that
                # selection's barrier (pair() chooses which auto row meets which MPI row).
                cell.setdefault("autos", {})[selector] = (row["time_us"],
                                                          row.get("selected", "?"))
            else:
                cell.setdefault("algos", {})[algo] = row["time_us"]
    return cells


# auto and MPI running the same algorithm (same messages) differ by a few simulated nanoseconds
# either way (the ends of the call, a zero-byte message): within 0.1 % is a tie, which the goal
# counts as met (and goals() says how many).
TIE = 0.999


SELECTORS = ("ompi", "mpich")

# Which auto row meets which selection's row (--pairing):
#   same-start (the default): each selection's row against auto's row from that selection's own
#     simulation, where one was recorded (auto after the same barrier: collx-bench times every
#     row of a simulation from the MPI library's barrier, and Open MPI's and MPICH's barriers
#     release the ranks in different orders); where none was, auto's row from Open MPI's
#     simulation, as the sweep pairs them. The cell's ratio is the lower of the two pairs'.
#   sweep: auto's row from Open MPI's simulation (MPICH's where only MPICH's ran) against the
#     faster of the two selections, each timed in its own simulation (the pairing before
#     scale-13).
PAIRINGS = ("same-start", "sweep")
PAIRING = "same-start"


def pair(cell):
    """cell["auto"] / cell["auto_sel"]: the sweep's auto row (Open MPI's simulation, else
    MPICH's)."""
    autos = cell.get("autos", {})
    for selector in SELECTORS:
        if selector in autos:
            cell["auto"], cell["auto_sel"] = autos[selector]
            return


def best_mpi(cell):
    times = [cell[s] for s in SELECTORS if s in cell]
    return min(times) if times else None


def pairs(cell, pairing=None):
    """[(ratio, selection, auto's us, auto's algorithm, auto's simulation)] for each selection
    that ran in the cell, under the pairing."""
    pairing = pairing or PAIRING
    if "auto" not in cell or cell["auto"] <= 0:
        return []
    out = []
    sweep = (cell["auto"], cell["auto_sel"],
             next((s for s in SELECTORS if s in cell.get("autos", {})), "?"))
    for selector in SELECTORS:
        if selector not in cell:
            continue
        auto = sweep
        if pairing == "same-start" and selector in cell.get("autos", {}):
            auto = cell["autos"][selector] + (selector,)
        if auto[0] > 0:
            out.append((cell[selector] / auto[0], selector) + auto)
    return out


def ratio(cell, pairing=None):
    """auto's speed over MPI in the cell: the lowest pair's ratio (under the sweep's pairing,
    the faster selection's time over auto's)."""
    p = pairs(cell, pairing)
    return min(p)[0] if p else None


def own_start(cell):
    """The selections met by auto's row from their own simulation other than Open MPI's (the
    cells whose pairing differs from the sweep's)."""
    return [s for s in SELECTORS[1:] if s in cell and s in cell.get("autos", {})
            and "ompi" in cell.get("autos", {})]


def tables(cells):
    out = []
    groups = sorted({(p, k) for (p, k, _, _) in cells})
    for platform, k in groups:
        nps = sorted({np for (p, kk, _, np) in cells if p == platform and kk == k})
        out.append(f"\n#### {platform}, {k} rank{'s' if k > 1 else ''} per host\n")
        if PAIRING == "same-start":
            out.append("auto's speed over SMPI's ompi and mpich selections (MPI time / auto "
                       "time, the lower of the two), each selection against auto timed after "
                       "the same barrier where that was simulated (†: MPICH's against auto's row "
                       "from MPICH's own simulation; without †, auto's row from Open MPI's "
                       "simulation meets both), and what auto ran (ompi's run / mpich's where "
                       "they differ).\n")
        else:
            out.append("auto's speed over the faster of SMPI's ompi and mpich selections "
                       "(MPI time / auto time), and what auto ran.\n")
        out.append("| collective | size | " + " | ".join(f"{np} ranks" for np in nps) + " |")
        out.append("|---|---:|" + "---|" * len(nps))
        for collective in COLLECTIVES:
            sizes = sorted({s for np in nps for s in cells.get((platform, k, collective, np), {})})
            for size in sizes:
                row = [collective, human(size)]
                for np in nps:
                    cell = cells.get((platform, k, collective, np), {}).get(size)
                    r = ratio(cell) if cell else None
                    if r is None:
                        row.append("")
                    else:
                        mark = "**" if r < TIE else ""
                        # A loss of under 0.5 % would print as 1.00.
                        digits = 3 if r < TIE and round(r, 2) >= 1.0 else 2
                        # Only one selection ran (the other's simulation did not finish).
                        alone = [x for x in ("ompi", "mpich") if x in cell]
                        note = f" ({alone[0]} only)" if len(alone) == 1 else ""
                        ran = cell["auto_sel"]
                        if PAIRING == "same-start" and own_start(cell):
                            other = cell["autos"]["mpich"][1]
                            ran = (ran if other == ran else f"{ran} / {other}") + " †"
                        row.append(f"{mark}{r:.{digits}f}{mark} {ran}{note}")
                out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def goal1(cells, pairing):
    """(total, below, ties, worst, own): goal 1's count under a pairing; own: the cells whose
    MPICH row meets auto's row from MPICH's own simulation."""
    total = below = ties = own = 0
    worst = []
    for (platform, k, collective, np), sizes in sorted(cells.items()):
        for size, cell in sorted(sizes.items()):
            p = pairs(cell, pairing)
            if not p:
                continue
            r, selector, _, ran, run = min(p)
            total += 1
            own += pairing == "same-start" and bool(own_start(cell))
            ties += TIE <= r < 1.0
            if r < TIE:
                below += 1
                worst.append((r, platform, k, collective, np, size, ran, selector, run))
    return total, below, ties, worst, own


def goal1_line(cells, pairing):
    total, below, ties, worst, own = goal1(cells, pairing)
    near = sum(1 for w in worst if w[0] >= 0.99)
    if pairing == "same-start":
        how = (f"same-start pairing: each selection against auto timed after that selection's "
               f"barrier, in its own simulation, where that was simulated (the MPICH rows of {own} "
               f"cells), else auto's row from Open MPI's simulation")
    else:
        how = ("the sweep's pairing: auto's row from Open MPI's simulation against the faster "
               "selection, each selection timed in its own simulation")
    return (f"Goal 1 (auto >= 1.0x MPI in every cell; {how}): {total - below} of {total} cells "
            f"met, {below} below ({near} of them within 1 %, {below - near} by more); {ties} of "
            f"the met cells are ties (auto within 0.1 % of MPI, most the same algorithm).")


def goals(cells):
    out = []
    total, below, ties, worst, own = goal1(cells, PAIRING)
    out.append(goal1_line(cells, PAIRING))
    for other in PAIRINGS:
        if other != PAIRING:
            out.append("")
            out.append(goal1_line(cells, other))
    # Met / total per collective and layout: where the losses gather.
    groups = collections.defaultdict(lambda: [0, 0])
    for (platform, k, collective, np), sizes in cells.items():
        for cell in sizes.values():
            r = ratio(cell)
            if r is not None:
                groups[(platform, k, np, collective)][0] += r >= TIE
                groups[(platform, k, np, collective)][1] += 1
    layouts = sorted({g[:3] for g in groups})
    out.append("\nCells met per collective and layout (platform, ranks per host, ranks):\n")
    out.append("| collective | " + " | ".join(f"{p} k{k} {n}" for p, k, n in layouts) + " |")
    out.append("|---|" + "---:|" * len(layouts))
    for collective in COLLECTIVES:
        row = []
        for layout in layouts:
            met, n = groups.get(layout + (collective,), (0, 0))
            row.append(f"{met}/{n}" if n else "")
        out.append(f"| {collective} | " + " | ".join(row) + " |")
    if worst:
        out.append("\nThe cells below 1.0 (lowest first):\n")
        out.append("| ratio | platform | per host | collective | ranks | size | auto ran "
                   "| against | auto's row from |")
        out.append("|---:|---|---:|---|---:|---:|---|---|---|")
        for w in sorted(worst)[:60]:
            out.append(f"| {w[0]:.3f} | {w[1]} | {w[2]} | {w[3]} | {w[4]} | {human(w[5])} | {w[6]} "
                       f"| {w[7]} | {w[8]}'s simulation |")
        if len(worst) > 60:
            out.append(f"\n({len(worst) - 60} more)")
    g2 = []
    for (platform, k, collective, np), sizes in sorted(cells.items()):
        if collective not in ("allreduce", "reduce_scatter") or np < 256 or k != 8:
            continue
        for size, cell in sorted(sizes.items()):
            if size < (1 << 20):
                continue
            r = ratio(cell)
            if r is not None:
                alone = [x for x in ("ompi", "mpich") if x in cell]
                g2.append((platform, collective, np, size, r,
                           cell["auto_sel"] + (f" ({alone[0]} only)" if len(alone) == 1 else "")))
    met = sum(1 for g in g2 if g[4] >= 1.3)
    out.append(f"\nGoal 2 (auto >= 1.3x MPI for allreduce and reduce_scatter from 1 MiB at >= 256 "
               f"ranks, 8 per host): {met} of {len(g2)} cells met.\n")
    if g2:
        out.append("| platform | collective | ranks | size | ratio | auto ran |")
        out.append("|---|---|---:|---:|---:|---|")
        for g in g2:
            out.append(f"| {g[0]} | {g[1]} | {g[2]} | {human(g[3])} | {g[4]:.2f} | {g[5]} |")
    return "\n".join(out)


def spearman(a, b):
    n = len(a)
    if n < 2:
        return 1.0
    pos = {x: i for i, x in enumerate(b)}
    d2 = sum((i - pos[x]) ** 2 for i, x in enumerate(a))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def model_check(cells, model, view):
    out = []
    predictions = {}
    layouts = sorted({(p, k, np) for (p, k, _, np) in cells})
    for platform, k, np in layouts:
        nodes = np // k
        alpha, bw = network_of(platform, nodes)
        switch = switch_of(platform, nodes)
        sizes = sorted({s for (p, kk, c, n), ss in cells.items() if (p, kk, n) == (platform, k, np)
                        for s in ss})
        path = f"/tmp/smpi_model_{platform}_{k}_{np}.json"
        command = [model, "-c", "all", "--nodes", str(nodes), "--ranks-per-node", str(k),
                   "--alpha-us", "0.2", "--bandwidth-gbps", "20", "--inter-alpha-us", str(alpha),
                   "--inter-gbps", str(bw), "--overhead-us", "0", *switch,
                   # What the sweep times: the mean of two calls back to back (collx-bench -n 2,
                   # scripts/smpi-sweep.sh), where a call may overlap the next one.
                   "--calls", "2",
                   # ... after the bench's barrier, which may release the ranks apart.
                   "--start", start_of(np),
                   "--sizes", ",".join(str(s) for s in sizes), "--json", path]
        if view == "network":
            command += ["--gamma-gbps", "1000000", "--copy-gbps", "1000000"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            predictions[(platform, k, np)] = json.load(f)
    agree = cells_n = within = timed = 0
    rhos = []
    misses = []
    off = []
    for (platform, k, collective, np), sizes in sorted(cells.items()):
        pred = predictions[(platform, k, np)]
        for size, cell in sorted(sizes.items()):
            sim = cell.get("algos", {})
            p = lookup(pred, collective, np, size)
            if not sim or not p:
                continue
            common = [a for a in sim if a in p]
            if len(common) < 2:
                continue
            sim_order = sorted(common, key=lambda a: sim[a])
            model_order = sorted(common, key=lambda a: p[a])
            cells_n += 1
            best = sim[sim_order[0]]
            if sim[model_order[0]] <= best * 1.05:
                agree += 1
            else:
                misses.append((platform, k, collective, np, size, sim_order[0], model_order[0],
                               sim[model_order[0]] / best))
            rhos.append(spearman(sim_order, model_order))
            chosen = cell.get("auto_sel")
            if chosen in p and chosen in sim and sim[chosen] > 0:
                timed += 1
                if abs(p[chosen] - sim[chosen]) <= 0.25 * sim[chosen]:
                    within += 1
                else:
                    off.append((platform, k, collective, np, size, chosen, sim[chosen],
                                p[chosen]))
    out.append(f"Model ranking: the model's fastest is the simulation's fastest (or within 5 % "
               f"of it) in {agree} of {cells_n} cells ({100 * agree / max(cells_n, 1):.0f} %); "
               f"mean Spearman correlation of the two orders {statistics.mean(rhos) if rhos else 0:.2f}.")
    out.append(f"Model time: within 25 % of the simulated time for the algorithm auto ran in "
               f"{within} of {timed} cells ({100 * within / max(timed, 1):.0f} %).")
    if misses:
        out.append("\nCells where the model's pick ran more than 5 % slower than the simulation's "
                   "fastest (worst first, at most 40):\n")
        out.append("| platform | per host | collective | ranks | size | simulation's fastest | "
                   "model's pick | its time / fastest |")
        out.append("|---|---:|---|---:|---:|---|---|---:|")
        for m in sorted(misses, key=lambda m: -m[7])[:40]:
            out.append(f"| {m[0]} | {m[1]} | {m[2]} | {m[3]} | {human(m[4])} | {m[5]} | {m[6]} "
                       f"| {m[7]:.2f} |")
    if off:
        out.append("\nCells where the model's time for the algorithm auto ran is more than 25 % "
                   "from the simulated time:\n")
        out.append("| platform | per host | collective | ranks | size | algorithm | simulated (us) "
                   "| model (us) | model / simulated |")
        out.append("|---|---:|---|---:|---:|---|---:|---:|---:|")
        for m in sorted(off, key=lambda m: (m[2], m[5], m[0], m[1], m[3], m[4])):
            out.append(f"| {m[0]} | {m[1]} | {m[2]} | {m[3]} | {human(m[4])} | {m[5]} "
                       f"| {m[6]:.2f} | {m[7]:.2f} | {m[7] / m[6]:.2f} |")
    return "\n".join(out)


def lookup(pred, collective, np, size):
    """{algorithm: predicted us} for one cell of collx-model's --json output."""
    for entry in pred["predictions"]:
        if entry["collective"] != collective or entry["ranks"] != np:
            continue
        for row in entry["rows"]:
            if int(row["size_bytes"]) == size:
                return {a: t * 1e6 for a, t in row["seconds"].items()}
    return {}


def svg_plot(path, title, series, ylabel):
    """A log-x line plot: series = {label: [(size, value)]}."""
    width, height, left, bottom, top, right = 720, 420, 60, 50, 40, 170
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    if not xs:
        return
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    y0, y1 = 0.0, max(2.0, max(ys) * 1.05)
    def px(x):
        return left + (math.log2(x) - x0) / max(x1 - x0, 1) * (width - left - right)
    def py(y):
        return height - bottom - (y - y0) / (y1 - y0) * (height - bottom - top)
    colours = ["#1b6ca8", "#d1495b", "#66a182", "#edae49", "#8d5fd3", "#00798c", "#30638e",
               "#e07a5f"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for y in [v / 2 for v in range(0, int(y1 * 2) + 1)]:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                     f'stroke="{"#888" if y == 1.0 else "#eee"}"/>')
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for e in range(int(x0), int(x1) + 1, 2):
        x = 2 ** e
        parts.append(f'<text x="{px(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
                     f'{human(x).replace(" ", "")}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 10}" '
                 f'text-anchor="middle">size</text>')
    parts.append(f'<text x="14" y="{(top + height - bottom) / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + height - bottom) / 2})">{ylabel}</text>')
    for i, (label, pts) in enumerate(series.items()):
        colour = colours[i % len(colours)]
        pts = sorted(pts)
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in
                     enumerate(pts))
        parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        ly = top + 16 * i + 10
        parts.append(f'<line x1="{width - right + 10}" x2="{width - right + 30}" y1="{ly}" '
                     f'y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{width - right + 36}" y="{ly + 4}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def plots(cells, directory, view):
    os.makedirs(directory, exist_ok=True)
    for collective in COLLECTIVES:
        for platform in sorted({p for (p, _, c, _) in cells if c == collective}):
            series = {}
            for (p, k, c, np), sizes in sorted(cells.items()):
                if p != platform or c != collective:
                    continue
                pts = [(s, ratio(cell)) for s, cell in sizes.items() if ratio(cell) is not None
                       and s > 0]
                if pts:
                    series[f"{np} ranks, {k}/host"] = pts
            if series:
                svg_plot(os.path.join(directory, f"{view}_{collective}_{platform}.svg"),
                         f"{collective} on {platform}: auto vs the faster SMPI selection", series,
                         "MPI time / auto time")


def walltime_rows(sweep):
    """walltime.tsv's rows: (view, platform, per host, collective, ranks, selector, wall s, KiB)."""
    with open(os.path.join(sweep, "walltime.tsv")) as f:
        next(f)
        for line in f:
            v, p, k, c, np, sel, wall, rss = line.rstrip("\n").split("\t")
            yield v, p, int(k), c, int(np), sel, int(wall), int(rss)


def walltime(sweep):
    """Every simulation of walltime.tsv, one row each (--walltime-list)."""
    out = ["| view | platform | per host | collective | ranks | selector | wall (s) | memory (GiB) |",
           "|---|---|---:|---|---:|---|---:|---:|"]
    for v, p, k, c, np, sel, wall, rss in walltime_rows(sweep):
        out.append(f"| {v} | {p} | {k} | {c} | {np} | {sel} | {wall} | {rss / (1 << 20):.1f} |")
    return "\n".join(out)


def walltime_summary(sweeps):
    """walltime.tsv of every sweep, one row per view, platform, ranks per host and rank count:
    how many simulations, their wall time (total, median, the longest and its collective) and the
    simulator's peak memory (--walltime; --walltime-list gives every simulation)."""
    groups = collections.defaultdict(list)
    for sweep in sweeps:
        for v, p, k, c, np, sel, wall, rss in walltime_rows(sweep):
            groups[(v, p, k, np)].append((wall, rss, c, sel))
    out = ["| view | platform | per host | ranks | simulations | wall total (s) | median (s) "
           "| longest (s) | its collective, selector | peak memory (GiB) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for key in sorted(groups, key=lambda key: (key[0] != "network", key[0], key[3], key[1], key[2])):
        runs = groups[key]
        wall, _, c, sel = max(runs)
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(runs)} "
                   f"| {sum(r[0] for r in runs)} | {statistics.median(r[0] for r in runs):g} "
                   f"| {wall} | {c}, {sel} | {max(r[1] for r in runs) / (1 << 20):.1f} |")
    return "\n".join(out)


def views(cells, directory):
    """The network view's auto and ompi rows (cells) beside DIR's reductions and compute views."""
    other = {v: load(directory, v) for v in ("reductions", "compute")}
    keys = sorted(set(other["reductions"]) | set(other["compute"]),
                  key=lambda key: (key[0], key[1], COLLECTIVES.index(key[2]), key[3]))
    out = ["| collective | ranks | size | network: auto | MPI | speed | reductions: auto | MPI "
           "| speed | compute: auto | MPI | speed |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in keys:
        platform, k, collective, np = key
        sizes = sorted(set(other["reductions"].get(key, {})) | set(other["compute"].get(key, {})))
        for size in sizes:
            row = [collective, str(np), human(size)]
            net = cells.get(key, {}).get(size, {})
            for cell in (net, other["reductions"].get(key, {}).get(size, {}),
                         other["compute"].get(key, {}).get(size, {})):
                auto, mpi = cell.get("auto"), cell.get("ompi")
                row += [f"{auto:.1f} ({cell.get('auto_sel', '?')})" if auto else "",
                        f"{mpi:.1f}" if mpi else "",
                        f"{mpi / auto:.2f}" if auto and mpi else ""]
            out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep")
    parser.add_argument("--view", default="network")
    parser.add_argument("--plots")
    parser.add_argument("--model")
    parser.add_argument("--goals", action="store_true")
    parser.add_argument("--walltime", action="store_true")
    parser.add_argument("--walltime-list", action="store_true")
    parser.add_argument("--no-tables", action="store_true")
    parser.add_argument("--views")
    parser.add_argument("--after", action="append", default=[],
                        help="a sweep of a later build: its auto rows replace the first sweep's "
                        "(the other rows are the same where the build changed only auto's "
                        "choices); its cells the first lacks are added whole where they have an MPI row")
    parser.add_argument("--pairing", choices=PAIRINGS, default="same-start",
                        help="which auto row meets which selection's row (PAIRINGS above); "
                        "--goals prints goal 1 under both")
    args = parser.parse_args()
    global PAIRING
    PAIRING = args.pairing
    cells = load(args.sweep, args.view)
    for later in args.after:
        for key, sizes in load(later, args.view).items():
            for size, cell in sizes.items():
                if size in cells.get(key, {}):
                    # Auto's rows per selection's simulation: a later one replaces the same
                    # selection's.
                    for selector, auto in cell.get("autos", {}).items():
                        cells[key][size].setdefault("autos", {})[selector] = auto
                    # A selection the sweep could not simulate there (-o with its mpi row): its
                    # row joins the cell; the sweep's own rows stay.
                    for selector in SELECTORS:
                        if selector in cell and selector not in cells[key][size]:
                            cells[key][size][selector] = cell[selector]
                elif "ompi" in cell or "mpich" in cell:
                    # A cell of auto's rows alone (-o) at a size the sweep lacks has no MPI row
                    # to meet: left out.
                    cells[key][size] = cell
    for sizes in cells.values():
        for cell in sizes.values():
            pair(cell)
    if not cells:
        print(f"smpi_tables: no results under {args.sweep}/{args.view}", file=sys.stderr)
        return 2
    if not args.no_tables:
        print(tables(cells))
    if args.goals:
        print()
        print(goals(cells))
    if args.model:
        print()
        print(model_check(cells, args.model, args.view))
    if args.views:
        print()
        print(views(cells, args.views))
    if args.plots:
        plots(cells, args.plots, args.view)
    if args.walltime:
        print()
        print(walltime_summary([args.sweep] + args.after))
    if args.walltime_list:
        for sweep in [args.sweep] + args.after:
            print(f"\n{os.path.basename(os.path.normpath(sweep))}:\n")
            print(walltime(sweep))
    return 0


if __name__ == "__main__":
    sys.exit(main())

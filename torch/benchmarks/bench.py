#!/usr/bin/env python3
"""torch.distributed on collx against gloo, in the same job: time per call from Python.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python torch/benchmarks/bench.py \
        --ops all_reduce,broadcast,all_gather --runs 3 --ddp 10 --json out.json

Each (operation, size) is timed on collx and on gloo in turn, --runs times, interleaved: one run
is 5 rounds of back-to-back blocking calls after a warm-up, a round's time the slowest rank's
mean per call, the run's time its median round (collx-bench's method); the table shows the
median of the runs. float32 tensors; all_gather's size is the output's.
`--ddp STEPS` also times DDP training steps (samples/s, median of the runs) on each backend, and
the same loop without DDP (no gradient allreduce), the ceiling either backend can reach.
Rank 0 ends with the results as compact markdown tables (the form docs/PERFORMANCE.md keeps),
headed by the machine, the load average before and after, and the command.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
WARMUP = 5
ROUNDS = 5


def parse_size(text):
    text = text.upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text[-1] in UNITS else ""
    return int(text[:-1] if unit else text) * UNITS[unit]


def human(nbytes):
    for unit in ("GiB", "MiB", "KiB"):
        if nbytes >= UNITS[unit[0]]:
            return f"{nbytes // UNITS[unit[0]]} {unit}"
    return f"{nbytes} B"


def make_call(op, nbytes, group, size):
    n = max(1, nbytes // 4)
    if op == "all_reduce":
        t = torch.zeros(n)  # stays finite however often it is summed
        return lambda: dist.all_reduce(t, group=group)
    if op == "broadcast":
        t = torch.ones(n)
        return lambda: dist.broadcast(t, src=0, group=group)
    if op == "all_gather":
        per_rank = max(1, n // size)
        out = [torch.empty(per_rank) for _ in range(size)]
        t = torch.ones(per_rank)
        return lambda: dist.all_gather(out, t, group=group)
    if op == "all_gather_into_tensor":
        per_rank = max(1, n // size)
        out = torch.empty(per_rank * size)
        t = torch.ones(per_rank)
        return lambda: dist.all_gather_into_tensor(out, t, group=group)
    raise ValueError(f"unknown operation {op}")


def iterations_for(nbytes):
    # Calls per round: about 8 MiB moved, between 1 and 50.
    return max(1, min(50, (8 << 20) // max(nbytes, 1)))


def time_run(call, iterations, group, rounds=ROUNDS):
    """One run: `rounds` rounds of `iterations` calls after a barrier, a round's time the slowest
    rank's mean per call, the run's time the median round (as collx-bench times its rows; on a
    shared machine the mean of one long loop is the time of its worst preemption)."""
    for _ in range(WARMUP):
        call()
    per_round = torch.empty(rounds, dtype=torch.float64)
    for r in range(rounds):
        dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(iterations):
            call()
        per_round[r] = (time.perf_counter() - start) / iterations
    dist.all_reduce(per_round, op=dist.ReduceOp.MAX, group=group)
    return per_round.median().item()


def ddp_samples_per_second(group, steps, batch, size, rank, wrap=True):
    """DDP's samples/s on `group`; with wrap=False the same model and loop without DDP (no
    gradient allreduce: every rank trains on its own), the compute-bound ceiling."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    ddp = DDP(model, process_group=group) if wrap else model
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    local = batch // size
    data = torch.Generator().manual_seed(rank)
    x = torch.randn(local, 64, generator=data)
    y = torch.randint(0, 10, (local,), generator=data)

    def step():
        optimizer.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        optimizer.step()

    seconds = time_run(step, steps, group)
    return local * size / seconds


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def markdown(rows, size, load_before, load_after):
    """The results as markdown: one table per operation, and the DDP line."""
    out = [f"np={size}, torch {torch.__version__}, {cpu_model()}, {os.cpu_count()} cores, "
           f"load average before {load_before}, after {load_after}",
           f"command: mpirun -np {size} ... {' '.join(sys.argv)}", ""]
    ops = [r["op"] for r in rows if r["op"] != "ddp"]
    for op in dict.fromkeys(ops):
        out += [f"{op} (float32, us per call, median of runs)", "",
                "| size | collx us | gloo us | gloo/collx | collx GB/s | gloo GB/s |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in rows:
            if r["op"] != op:
                continue
            c, g = r["collx_median_us"], r["gloo_median_us"]
            out.append(f"| {human(r['bytes'])} | {c:.1f} | {g:.1f} | {g / c:.1f} | "
                       f"{r['bytes'] / c / 1e3:.3f} | {r['bytes'] / g / 1e3:.3f} |")
        out.append("")
    for r in rows:
        if r["op"] == "ddp":
            c = statistics.median(r["collx_samples_per_s"])
            g = statistics.median(r["gloo_samples_per_s"])
            n = statistics.median(r["no_ddp_samples_per_s"])
            out += ["| DDP ranks | collx samples/s | gloo samples/s | collx/gloo | without DDP "
                    "(ceiling) | collx/ceiling | runs (collx; gloo; without) |",
                    "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
                    f"| {size} | {c:.0f} | {g:.0f} | {c / g:.2f} | {n:.0f} | {c / n:.2f} | "
                    f"{', '.join(f'{v:.0f}' for v in r['collx_samples_per_s'])}; "
                    f"{', '.join(f'{v:.0f}' for v in r['gloo_samples_per_s'])}; "
                    f"{', '.join(f'{v:.0f}' for v in r['no_ddp_samples_per_s'])} |", ""]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="all_reduce,broadcast,all_gather_into_tensor,all_gather")
    parser.add_argument("--sizes", default="8,64,512,4K,32K,256K,1M,4M,16M,64M",
                        help="bytes per call, comma-separated (K, M suffixes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ddp", type=int, default=0, metavar="STEPS",
                        help="also time DDP training, STEPS steps per round, on each backend")
    parser.add_argument("--batch", type=int, default=256, help="DDP global batch")
    parser.add_argument("--json", help="write the results here (rank 0)")
    args = parser.parse_args()

    load_before = load_average()
    dist.init_process_group("collx")
    torch.set_num_threads(1)
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"collx": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    sizes = [parse_size(text) for text in args.sizes.split(",")]

    rows = []
    for op in args.ops.split(","):
        if rank == 0:
            print(f"\n{op}, float32, {size} ranks (median of {args.runs} runs, us per call)")
            print(f"{'size':>10} {'collx us':>10} {'gloo us':>10} {'collx GB/s':>11} "
                  f"{'gloo GB/s':>10} {'gloo/collx':>10}", flush=True)
        for nbytes in sizes:
            times = {name: [] for name in groups}
            for _ in range(args.runs):
                for name, group in groups.items():
                    call = make_call(op, nbytes, group, size)
                    times[name].append(time_run(call, iterations_for(nbytes), group))
            median = {name: statistics.median(t) for name, t in times.items()}
            row = {"op": op, "bytes": nbytes, "ranks": size, "runs": args.runs,
                   **{f"{name}_us": [t * 1e6 for t in times[name]] for name in groups},
                   **{f"{name}_median_us": median[name] * 1e6 for name in groups}}
            rows.append(row)
            if rank == 0:
                print(f"{human(nbytes):>10} {median['collx'] * 1e6:10.1f} {median['gloo'] * 1e6:10.1f} "
                      f"{nbytes / median['collx'] / 1e9:11.3f} {nbytes / median['gloo'] / 1e9:10.3f} "
                      f"{median['gloo'] / median['collx']:10.2f}", flush=True)

    if args.ddp:
        rates = {name: [] for name in groups}
        ceiling = []
        for _ in range(args.runs):
            for name, group in groups.items():
                rates[name].append(ddp_samples_per_second(group, args.ddp, args.batch, size, rank))
            ceiling.append(ddp_samples_per_second(groups["gloo"], args.ddp, args.batch, size, rank,
                                                  wrap=False))
        row = {"op": "ddp", "ranks": size, "steps": args.ddp, "batch": args.batch,
               **{f"{name}_samples_per_s": rates[name] for name in groups},
               "no_ddp_samples_per_s": ceiling}
        rows.append(row)
        if rank == 0:
            print(f"\nDDP, MLP 64-256-256-10, global batch {args.batch}, {ROUNDS} rounds of {args.ddp} "
                  f"steps (median of {args.runs} runs): collx "
                  f"{statistics.median(rates['collx']):.0f} samples/s, gloo "
                  f"{statistics.median(rates['gloo']):.0f} samples/s, without DDP "
                  f"{statistics.median(ceiling):.0f} samples/s", flush=True)

    if rank == 0:
        print("\n" + markdown(rows, size, load_before, load_average()), flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

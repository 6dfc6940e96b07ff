#!/usr/bin/env python3
"""Per-step times of a process's first DDP models, on one backend: where the time of the first
steps goes (docs/PERFORMANCE.md, "PyTorch": the first DDP model of a process ran 1-90 ms a step,
erratically, for ~60 steps on a loaded machine).

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python torch/benchmarks/ddp_steps.py \
        --backend collx --models 2 --steps 100

bench.py's model and loop (MLP 64-256-256-10, SGD, 128 samples per rank, one intra-op thread);
each step timed on every rank, a step's time the slowest rank's. Rank 0 prints, per model, the
median and maximum of steps 1-10, 11-60 and 61-end, the number of steps above 3x the last
steps' median, and the times of the first 20 steps.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="collx", choices=["collx", "gloo"])
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    dist.init_process_group("collx")
    torch.set_num_threads(1)
    rank = dist.get_rank()
    group = dist.group.WORLD if args.backend == "collx" else dist.new_group(backend="gloo")
    for model_no in range(args.models):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
        ddp = DDP(model, process_group=group)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        data = torch.Generator().manual_seed(rank)
        x = torch.randn(128, 64, generator=data)
        y = torch.randint(0, 10, (128,), generator=data)
        times = torch.empty(args.steps, dtype=torch.float64)
        for step in range(args.steps):
            start = time.perf_counter()
            optimizer.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            optimizer.step()
            times[step] = (time.perf_counter() - start) * 1e3
        dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
        if rank == 0:
            ms = times.tolist()
            steady = statistics.median(ms[60:]) if len(ms) > 60 else statistics.median(ms)
            parts = []
            for lo, hi in ((0, 10), (10, 60), (60, len(ms))):
                part = ms[lo:hi]
                if part:
                    parts.append(f"steps {lo + 1}-{hi}: median {statistics.median(part):.2f} "
                                 f"max {max(part):.2f}")
            slow = sum(t > 3 * steady for t in ms)
            print(f"{args.backend} model {model_no}: " + "; ".join(parts) +
                  f"; {slow} steps above 3x {steady:.2f} ms; first 20: " +
                  " ".join(f"{t:.1f}" for t in ms[:20]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

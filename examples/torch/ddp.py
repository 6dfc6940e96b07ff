#!/usr/bin/env python3
"""DistributedDataParallel training of a small MLP with backend="collx".

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python examples/torch/ddp.py
    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python examples/torch/ddp.py --backend gloo

The data set is synthetic (labels from a fixed random "teacher" network, so there is something to
learn) and made the same on every rank; each rank trains on its own shard of every global batch.
Rank 0 prints the loss, the held-out accuracy and the samples per second of each epoch.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import collx_torch  # noqa: F401  (registers the "collx" backend, sets RANK/WORLD_SIZE from MPI)
import torch.distributed as dist

FEATURES, CLASSES = 64, 10


def synthetic_data(samples, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    y = (torch.tanh(x) @ teacher).argmax(dim=1)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="collx")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256, help="global batch size")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--samples", type=int, default=32768)
    args = parser.parse_args()

    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # one core per rank, as the MPI processes are placed
    torch.manual_seed(rank)  # DDP broadcasts rank 0's initial weights to the others

    x, y = synthetic_data(args.samples + 4096)
    x_test, y_test = x[args.samples:], y[args.samples:]
    x, y = x[:args.samples], y[:args.samples]
    model = nn.Sequential(nn.Linear(FEATURES, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, CLASSES))
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    local = args.batch // size
    if rank == 0:
        print(f"backend {dist.get_backend()}, {size} ranks, global batch {local * size}, "
              f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)

    for epoch in range(args.epochs):
        order = torch.randperm(args.samples, generator=torch.Generator().manual_seed(epoch))
        start = time.perf_counter()
        steps = args.samples // (local * size)
        total_loss = torch.zeros(1)
        for step in range(steps):
            batch = order[step * local * size:(step + 1) * local * size][rank * local:(rank + 1) * local]
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            total_loss += loss.detach()
        elapsed = time.perf_counter() - start
        dist.all_reduce(total_loss)  # SUM: gloo has no AVG
        with torch.no_grad():
            accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {total_loss.item() / steps / size:.4f}, test accuracy "
                  f"{accuracy:.3f}, {steps * local * size / elapsed:.0f} samples/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

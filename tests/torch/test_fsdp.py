#!/usr/bin/env python3
"""FSDP2 (fully_shard) on collx: the same losses and weights as one process.

collx-train's MLP shape (784-512-256-10), each Linear and the root sharded over the group's
CPU device mesh: all_gather_into_tensor for the parameters, reduce_scatter_tensor for the
gradients. Every rank trains on its share of a global batch of 64 random samples for K steps
of AdamW; beside it, each rank trains an unsharded copy of the model on the whole global batch
in one process. The losses (the global batch's mean, all-reduced over gloo) must match the
one-process losses within 1e-5 relative, and the full parameters gathered at the end within
1e-5 (the sums run in another order). The same run on gloo (which has reduce_scatter on
PyTorch 2.15) is printed beside it.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python tests/torch/test_fsdp.py
"""
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

import collx_torch  # noqa: F401
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

STEPS = 8
TOLERANCE = 1e-5

dist.init_process_group("collx")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
torch.set_num_threads(1)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


data = torch.Generator().manual_seed(7)
batches = [(torch.randn(64, 784, generator=data), torch.randint(0, 10, (64,), generator=data))
           for _ in range(STEPS)]
local = 64 // SIZE


def train_single():
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def train_fsdp(group):
    mesh = init_device_mesh("cpu", (SIZE,)) if group is None else \
        dist.device_mesh.DeviceMesh.from_group(group, "cpu")
    m = model()
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(m(x[RANK * local:(RANK + 1) * local]),
                               y[RANK * local:(RANK + 1) * local])
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=GLOO)
        losses.append(mean.item() / SIZE)
    full = torch.cat([p.full_tensor().detach().reshape(-1) for p in m.parameters()])
    return losses, full


single_losses, single_weights = train_single()
failures = []
for backend, group in (("collx", None), ("gloo", GLOO)):
    losses, weights = train_fsdp(group)
    gap = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(losses, single_losses))
    wgap = (weights - single_weights).abs().max().item()
    if RANK == 0:
        print(f"fsdp2 on {backend}, np={SIZE}: losses {['%.5f' % v for v in losses]}, "
              f"max relative gap to one process {gap:.3g}, weights {wgap:.3g}", flush=True)
    if backend == "collx":
        if gap > TOLERANCE:
            failures.append(f"rank {RANK}: collx FSDP2 losses differ from one process's by {gap:.3g}")
        if not torch.allclose(weights, single_weights, rtol=TOLERANCE, atol=TOLERANCE):
            failures.append(f"rank {RANK}: collx FSDP2 weights differ from one process's by {wgap:.3g}")
if RANK == 0:
    print(f"one process: losses {['%.5f' % v for v in single_losses]}", flush=True)
total = torch.tensor([len(failures)])
dist.all_reduce(total, group=GLOO)
for line in failures:
    print(line, flush=True)
if RANK == 0:
    print(f"np={SIZE}: {int(total)} failures in all", flush=True)
dist.destroy_process_group()
sys.exit(1 if int(total) else 0)

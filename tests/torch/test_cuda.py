#!/usr/bin/env python3
"""CUDA tensors on collx (a build where collx and torch both have CUDA, on a machine with a GPU;
ctest registers it only where torch saw one at configure time): the collectives FSDP and DDP use,
on each rank's GPU (LOCAL_RANK), against the same calls on CPU tensors through gloo, and
send/recv refused with an error that says so.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python tests/torch/test_cuda.py
"""
import os
import sys

import torch

import collx_torch  # noqa: F401
import torch.distributed as dist

dist.init_process_group("collx")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", RANK)) % torch.cuda.device_count())
failures = []


def check(name, got, want):
    if not torch.equal(got.cpu(), want):
        failures.append(f"rank {RANK} {name}: {got.reshape(-1)[:4].tolist()} != "
                        f"{want.reshape(-1)[:4].tolist()}")


for dtype in (torch.float32, torch.bfloat16, torch.int64):
    for n in (7, 1 << 20):
        x = ((torch.arange(n) * 7 + 3 * RANK) % 5 - 2).to(dtype)
        want = x.float() if dtype == torch.bfloat16 else x.clone()
        dist.all_reduce(want, group=GLOO)
        got = x.cuda()
        dist.all_reduce(got)
        check(f"all_reduce {dtype} n={n}", got, want.to(dtype))
        got = x.cuda()
        dist.broadcast(got, src=SIZE - 1)
        want = x.clone() if RANK == SIZE - 1 else torch.empty_like(x)
        dist.broadcast(want.float() if dtype == torch.bfloat16 else want, src=SIZE - 1, group=GLOO)
        out = torch.empty(n * SIZE, dtype=dtype, device="cuda")
        dist.all_gather_into_tensor(out, x.cuda())
        every = [torch.empty_like(x.float()) for _ in range(SIZE)]
        dist.all_gather(every, x.float(), group=GLOO)
        check(f"all_gather_into_tensor {dtype} n={n}", out, torch.cat(every).to(dtype))
        inputs = x.repeat(SIZE)
        out = torch.empty(n, dtype=dtype, device="cuda")
        work = dist.reduce_scatter_tensor(out, inputs.cuda(), async_op=True)
        work.wait()
        want = inputs.float()
        dist.all_reduce(want, group=GLOO)
        check(f"reduce_scatter_tensor {dtype} n={n}", out, want.to(dtype).chunk(SIZE)[RANK])
try:
    dist.send(torch.ones(2, device="cuda"), (RANK + 1) % SIZE)
    failures.append(f"rank {RANK}: send of a CUDA tensor: no error")
except RuntimeError as e:
    if "collx" not in str(e) or "CPU" not in str(e):
        failures.append(f"rank {RANK}: send of a CUDA tensor: {e}")
total = torch.tensor([len(failures)])
dist.all_reduce(total, group=GLOO)
for line in failures[:20]:
    print(line, flush=True)
if RANK == 0:
    print(f"np={SIZE}: CUDA tensors, {int(total)} failures in all", flush=True)
dist.destroy_process_group()
sys.exit(1 if int(total) else 0)

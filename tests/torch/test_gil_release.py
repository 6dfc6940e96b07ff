#!/usr/bin/env python3
"""Works that hold the last reference to a tensor made in Python, completed by the backend's
completion thread while the main thread calls into the backend with the GIL held.

A tensor made in Python and handed to a collective (the bf16 and fp16 DDP comm hooks' compressed
copy of a bucket) outlives its Python name: when the hook returns, the work holds its last
reference, and releasing it takes the GIL. Work.get_future() runs with the GIL held and takes the
completion thread's lock, so a completion thread that released a finished work while holding
that lock waited for the GIL while the main thread waited for the lock: both ranks hung (the
bf16 step of test_ddp.py, now and then under load). Here that happens thousands of times a
second: async all_reduces of fresh tensors whose futures are asked for and dropped, and the bf16
hook's own pattern (a .to(bfloat16) copy, get_future().then() with a Python callback), every
result checked. A hang is turned into a failure with both ranks' stacks by faulthandler.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python tests/torch/test_gil_release.py
"""
import faulthandler
import sys

import torch

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist

# A thread of faulthandler's own (no GIL needed): the stacks and exit 1 rather than a hang.
faulthandler.dump_traceback_later(120, exit=True)

dist.init_process_group("collx")
RANK = dist.get_rank()
SIZE = dist.get_world_size()
expected = SIZE * (SIZE + 1) / 2
failures = []

# 1. Fresh tensors, futures asked for and dropped: the completion thread finishes the works and
# holds their last references (no callback keeps them).
sync = torch.zeros(1)
for i in range(20000):
    t = torch.full((64,), float(RANK + 1))
    w = dist.all_reduce(t, async_op=True)
    w.get_future()
    del t, w
    if i % 16 == 15:
        dist.all_reduce(sync)  # keeps the ranks within 16 calls of each other

# 2. The bf16 hook's pattern: a copy made by .to(), a Python callback chained on the future
# that writes into another tensor; the copy's only reference is the work's.
done = []
window = []
for i in range(5000):
    out = torch.zeros(256)
    compressed = torch.full((256,), float(RANK + 1)).to(torch.bfloat16)
    future = dist.all_reduce(compressed, async_op=True).get_future()
    window.append((future.then(lambda f, out=out: out.copy_(f.value()[0])), out))
    del compressed, future
    while len(window) > 8:
        f, out = window.pop(0)
        f.wait()
        done.append(bool(torch.all(out == expected)))
for f, out in window:
    f.wait()
    done.append(bool(torch.all(out == expected)))
if not all(done) or len(done) != 5000:
    failures.append(f"rank {RANK}: {done.count(False)} of {len(done)} bf16 results wrong")

total = torch.tensor([len(failures)])
dist.all_reduce(total)
for line in failures:
    print(line, flush=True)
if RANK == 0:
    print(f"np={SIZE}: 20000 dropped futures, 5000 chained bf16 futures, {int(total)} failures",
          flush=True)
faulthandler.cancel_dump_traceback_later()
dist.destroy_process_group()
sys.exit(1 if int(total) else 0)

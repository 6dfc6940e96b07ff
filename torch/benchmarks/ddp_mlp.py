#!/usr/bin/env python3
"""DDP on collx-train's MLP: collx, gloo and DDP without communication, interleaved in one job.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python torch/benchmarks/ddp_mlp.py \
        --batch 256,1024 --rounds 5 --backends collx,gloo,noop

The model, its initialisation and the optimizer are examples/torch/train_mlp.py's (784-512-256-10,
AdamW), Fashion-MNIST's images, one intra-op thread, DDP buckets of --bucket-mb (0.5 MB: two
buckets, [last layer, second layer] and [first layer], the first layer's 1.6 MB gradient last).
Every backend's DDP model is warmed up, then rounds alternate the backends' order; in a round
each backend runs --steps steps with DDP's gradient synchronisation and --steps under no_sync(),
interleaved, each step started after a gloo barrier and timed as the slowest rank's. Rank 0
prints, per backend, the median step with and without synchronisation, exposed communication
((with - without) / with) and samples/s (global batch / median step with synchronisation), and
collx / gloo. "noop" is DDP with a comm hook that returns the bucket as it is: DDP's own cost of
a synchronised step (copies into and out of the buckets, the reducer's bookkeeping), a floor no
backend can go below.
"""
import argparse, os, statistics, sys, time
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/torch"))
import collx_torch  # noqa
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from train_mlp import load, make_model, make_optimizer

p = argparse.ArgumentParser()
p.add_argument("--batch", default="256")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--warmup", type=int, default=20)
p.add_argument("--bucket-mb", type=float, default=0.5)
p.add_argument("--as-view", type=int, default=0, help="gradient_as_bucket_view (all backends)")
p.add_argument("--backends", default="collx,gloo")
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("collx")
R, S = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
x, y = load("train")
x = (x - x.mean()) / x.std()
for batch in [int(b) for b in a.batch.split(",")]:
    local = batch // S
    nets = {}
    for b in a.backends.split(","):
        m = make_model()
        d = DDP(m, bucket_cap_mb=a.bucket_mb, process_group=gloo if b == "gloo" else None,
                gradient_as_bucket_view=bool(a.as_view))
        if b == "noop":  # DDP's own cost: buckets and copies, no communication
            def noop(state, bucket):
                f = torch.futures.Future()
                f.set_result(bucket.buffer())
                return f
            d.register_comm_hook(None, noop)
        nets[b] = (m, d, make_optimizer(m.parameters(), 1e-4))
    def step(b, i, sync):
        m, d, o = nets[b]
        idx = torch.randint(0, x.shape[0], (batch,), generator=torch.Generator().manual_seed(i))
        idx = idx[R * local:(R + 1) * local]
        o.zero_grad(set_to_none=True)
        if sync:
            F.cross_entropy(d(x[idx]), y[idx]).backward()
        else:
            with d.no_sync():
                F.cross_entropy(d(x[idx]), y[idx]).backward()
        o.step()
    for b in nets:
        for i in range(a.warmup):
            step(b, i, True)
    res = {b: ([], []) for b in nets}
    order = list(nets)
    for r in range(a.rounds):
        for b in (order if r % 2 == 0 else order[::-1]):
            for i in range(a.steps):
                for sync, times in ((True, res[b][0]), (False, res[b][1])):
                    dist.barrier(group=gloo)
                    t0 = time.perf_counter()
                    step(b, i, sync)
                    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
                    times.append(t.item())
    if R == 0:
        out = {}
        for b, (w, wo) in res.items():
            mw, mwo = statistics.median(w), statistics.median(wo)
            out[b] = batch / mw
            print(f"batch {batch} {b}: {mw*1e3:.2f} ms with, {mwo*1e3:.2f} without, exposed "
                  f"{100*max(0, mw-mwo)/mw:.1f}%, {batch/mw:.0f} samples/s", flush=True)
        if "gloo" in out and "collx" in out:
            print(f"batch {batch}: collx/gloo {out['collx']/out['gloo']:.2f}x", flush=True)
dist.destroy_process_group()

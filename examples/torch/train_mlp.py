#!/usr/bin/env python3
"""collx-train's MLP on Fashion-MNIST with PyTorch: DDP (with or without a comm hook), FSDP2
(fully_shard), FSDP1 or one process, on any torch.distributed backend.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python examples/torch/train_mlp.py
    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python examples/torch/train_mlp.py --parallel fsdp2
    PYTHONPATH=build/torch build-venv/bin/torchrun --nproc-per-node 2 examples/torch/train_mlp.py --backend gloo

The model and recipe are collx-train's defaults (apps/train): 784-512-256-10 with ReLU (its
initialisation, pixels standardised by the training set's mean and deviation), AdamW
(lr 1.5e-3 per 256 samples of the global batch, weight decay 0.1 on the weights), one epoch of
linear warm-up then cosine decay, global batch 1024, 12 epochs. Each rank trains on its share
of every global batch; rank 0 prints the loss, the test accuracy and the samples/s of each
epoch. With --measure-steps N (DDP), rank 0 then times N steps with DDP's gradient allreduces
and N steps of the same work without them (ddp.no_sync()), interleaved, and prints the exposed
communication: the median step with communication minus the median step without, as a share
of the step.
"""
import argparse
import gzip
import math
import os
import statistics
import struct
import time

import torch
import torch.nn.functional as F
from torch import nn

import collx_torch  # noqa: F401  (registers "collx"; under mpirun sets RANK, WORLD_SIZE...)
import torch.distributed as dist

DATA = os.environ.get("COLLX_TRAIN_DATA", "/usr/share/datasets/fashion-mnist")


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).view(*shape)


def load(split):
    prefix = "train" if split == "train" else "t10k"
    def find(name):
        for suffix in ("", ".gz"):
            path = os.path.join(DATA, name + suffix)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"{name}(.gz) not in {DATA} (COLLX_TRAIN_DATA)")
    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).reshape(-1, 784).float() / 255.0
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    return x, y


def make_model(hidden=(512, 256), seed=0):
    """collx-train's initialisation: weights uniform in +-sqrt(6 / fan_in) before a ReLU,
    +-sqrt(3 / fan_in) for the last layer, biases zero."""
    torch.manual_seed(seed)
    sizes = (784,) + tuple(hidden) + (10,)
    layers = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        relu_follows = i + 2 < len(sizes)
        bound = math.sqrt((6.0 if relu_follows else 3.0) / sizes[i])
        with torch.no_grad():
            linear.weight.uniform_(-bound, bound)
            linear.bias.zero_()
        layers.append(linear)
        if relu_follows:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def make_optimizer(params, lr):
    params = list(params)
    decay = [p for p in params if p.dim() > 1]
    rest = [p for p in params if p.dim() <= 1]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}], lr=lr)


def learning_rate(step, steps_per_epoch, epochs, top):
    warmup = steps_per_epoch  # one epoch
    if step < warmup:
        return top * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, epochs * steps_per_epoch - warmup))
    return top * 0.5 * (1 + math.cos(math.pi * progress))


def wrap(model, args, rank, size):
    """The model as --parallel wants it, and the DDP wrapper (None unless DDP)."""
    if args.parallel == "single":
        return model, None
    if args.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        # PowerSGD's callbacks wait on further allreduces: with several buckets in flight, ranks
        # may launch them in different orders on backends whose futures complete on threads of
        # their own (gloo and collx), so it gets one bucket.
        cap = 64 if args.compress == "powersgd" else args.bucket_mb
        ddp = DDP(model, bucket_cap_mb=cap)
        if args.compress == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif args.compress == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        elif args.compress == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
            state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                           start_powerSGD_iter=10)
            ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        return ddp, ddp
    if args.parallel == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (size,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model, None
    if args.parallel == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        return FSDP(model, use_orig_params=True), None
    raise ValueError(args.parallel)


def evaluate(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="collx")
    parser.add_argument("--parallel", default="ddp", choices=["ddp", "fsdp2", "fsdp1", "single"])
    parser.add_argument("--compress", default="none", choices=["none", "fp16", "bf16", "powersgd"])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=1024, help="global batch")
    parser.add_argument("--lr", type=float, default=1.5e-3, help="per 256 samples")
    parser.add_argument("--bucket-mb", type=float, default=0.5,
                        help="DDP bucket size (small: several buckets reduced during backward)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--measure-steps", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    if args.parallel == "single":
        rank, size = 0, 1
    else:
        dist.init_process_group(args.backend)
        rank, size = dist.get_rank(), dist.get_world_size()
    x, y = load("train")
    x_test, y_test = load("test")
    # Standardised by the training set's pixel mean and deviation, as collx-train does.
    mean, std = x.mean(), x.std()
    x, x_test = (x - mean) / std, (x_test - mean) / std
    model, ddp = wrap(make_model(), args, rank, size)
    top = args.lr * args.batch / 256
    optimizer = make_optimizer(model.parameters(), top)
    local = args.batch // size
    steps = x.shape[0] // args.batch
    if rank == 0:
        print(f"{args.parallel} on {args.backend if size > 1 or args.parallel != 'single' else '-'}"
              f", {size} ranks, global batch {local * size}, compress {args.compress}, torch "
              f"{torch.__version__}", flush=True)

    def train_step(batch, sync=True):
        optimizer.zero_grad(set_to_none=True)
        if ddp is not None and not sync:
            with ddp.no_sync():
                loss = F.cross_entropy(model(x[batch]), y[batch])
                loss.backward()
        else:
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
        optimizer.step()
        return loss.detach()

    step = 0
    for epoch in range(args.epochs):
        order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(epoch))
        loss_sum = torch.zeros(1, dtype=torch.float64)
        start = time.perf_counter()
        for i in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, steps, args.epochs, top)
            batch = order[i * args.batch:(i + 1) * args.batch][rank * local:(rank + 1) * local]
            loss_sum += train_step(batch).double()
            step += 1
        elapsed = time.perf_counter() - start
        if size > 1 or args.parallel != "single":
            dist.all_reduce(loss_sum)
        accuracy = evaluate(model, x_test, y_test)
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {loss_sum.item() / steps / size:.4f}, test accuracy "
                  f"{accuracy:.4f}, {steps * local * size / elapsed:.0f} samples/s", flush=True)

    if args.measure_steps and ddp is not None:
        with_comm, without = [], []
        order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(99))
        for i in range(args.measure_steps):
            batch = order[i * args.batch:(i + 1) * args.batch][rank * local:(rank + 1) * local]
            for sync, times in ((True, with_comm), (False, without)):
                dist.barrier()
                start = time.perf_counter()
                train_step(batch, sync)
                t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's step
                times.append(t.item())
        if rank == 0:
            a, b = statistics.median(with_comm), statistics.median(without)
            print(f"steps: {a * 1e3:.2f} ms with DDP's allreduces, {b * 1e3:.2f} ms without "
                  f"(no_sync); exposed communication {max(0.0, a - b) * 1e3:.2f} ms = "
                  f"{100 * max(0.0, a - b) / a:.1f}% of a step; {local * size / a:.0f} samples/s",
                  flush=True)
    if size > 1 or args.parallel != "single":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

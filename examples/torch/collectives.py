#!/usr/bin/env python3
"""torch.distributed's operations one by one, as the PyTorch tutorials show them, on collx.

    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python examples/torch/collectives.py
    PYTHONPATH=build/torch mpirun -np 4 build-venv/bin/python examples/torch/collectives.py --backend gloo

Every rank prints what it holds after each operation; `--backend gloo` runs the same script on
PyTorch's own CPU backend for comparison (mpirun only starts the processes then).
"""
import argparse

import torch

import collx_torch  # noqa: F401  (registers the "collx" backend, sets RANK/WORLD_SIZE from MPI)
import torch.distributed as dist
from torch.distributed import ReduceOp


def show(what, value):
    print(f"rank {dist.get_rank()}: {what}: {value}", flush=True)
    dist.barrier()


def point_to_point(rank, size):
    """Rank 0 sends a tensor to every other rank; blocking, then the nonblocking pair."""
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        for peer in range(1, size):
            dist.send(tensor, dst=peer)
    else:
        dist.recv(tensor, src=0)
    show("send/recv from rank 0", tensor)

    tensor = torch.zeros(2)
    if rank == 0:
        requests = [dist.isend(tensor + 10 + peer, dst=peer) for peer in range(1, size)]
    else:
        requests = [dist.irecv(tensor, src=0)]
    for request in requests:
        request.wait()
    show("isend/irecv from rank 0", tensor)


def collectives(rank, size):
    tensor = torch.tensor([float(rank)])
    dist.broadcast(tensor, src=size - 1)
    show(f"broadcast from rank {size - 1}", tensor)

    for name, op in (("SUM", ReduceOp.SUM), ("AVG", ReduceOp.AVG), ("PRODUCT", ReduceOp.PRODUCT),
                     ("MIN", ReduceOp.MIN), ("MAX", ReduceOp.MAX)):
        tensor = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
        dist.all_reduce(tensor, op=op)
        show(f"all_reduce {name}", tensor)

    tensor = torch.ones(3, dtype=torch.int64) * (rank + 1)
    work = dist.all_reduce(tensor, async_op=True)  # returns at once; wait() completes it
    work.wait()
    show("all_reduce async_op=True, int64", tensor)

    tensor = torch.tensor([rank + 1.0])
    dist.reduce(tensor, dst=0, op=ReduceOp.SUM)
    show("reduce to rank 0 (only rank 0's result is defined)", tensor)

    gathered = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([rank, rank * 10.0]))
    show("all_gather", gathered)

    gathered = torch.zeros(2 * size, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(gathered, torch.tensor([rank, -rank], dtype=torch.bfloat16))
    show("all_gather_into_tensor, bfloat16", gathered)

    gather_list = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([rank * 2.0]), gather_list, dst=0)
    if rank == 0:
        show("gather to rank 0", gather_list)
    else:
        show("gather to rank 0", "sent")

    scatter_list = [torch.tensor([100.0 + r]) for r in range(size)] if rank == 0 else None
    tensor = torch.zeros(1)
    dist.scatter(tensor, scatter_list, src=0)
    show("scatter from rank 0", tensor)

    output = torch.zeros(2)
    dist.reduce_scatter(output, [torch.tensor([r, rank], dtype=torch.float32) for r in range(size)])
    show("reduce_scatter", output)

    output = torch.zeros(1, dtype=torch.int32)
    dist.reduce_scatter_tensor(output, torch.arange(size, dtype=torch.int32) * (rank + 1),
                               op=ReduceOp.MAX)
    show("reduce_scatter_tensor MAX, int32", output)

    send = torch.arange(size, dtype=torch.float32) + rank * size
    received = torch.zeros(size)
    dist.all_to_all_single(received, send)
    show("all_to_all_single", received)

    received = [torch.zeros(1) for _ in range(size)]
    dist.all_to_all(received, [torch.tensor([rank * 100.0 + r]) for r in range(size)])
    show("all_to_all", received)

    # A sub-group: new_group maps to collx's create_group on the listed ranks.
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    if rank % 2 == 0:
        tensor = torch.tensor([1.0])
        dist.all_reduce(tensor, group=evens)
        show("all_reduce in the group of even ranks", tensor)
    else:
        show("all_reduce in the group of even ranks", "not a member")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="collx", help="collx (default) or gloo")
    args = parser.parse_args()
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"backend {dist.get_backend()}, {size} processes", flush=True)
    dist.barrier()
    if size > 1:
        point_to_point(rank, size)
    collectives(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

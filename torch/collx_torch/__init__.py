"""collx as a torch.distributed backend.

    import collx_torch                       # registers the backend "collx"
    import torch.distributed as dist
    dist.init_process_group("collx")         # under mpirun: rank and size come from MPI

Importing this package initialises MPI (unless the program already did), registers the backend
with ``torch.distributed.Backend.register_backend`` and, where they are not set, sets the
environment variables that torch's default ``env://`` rendezvous reads (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) from MPI, so the same script also runs torch's own
backends (gloo) under mpirun. MPI is finalised at interpreter exit.
"""

import atexit
import os
import socket

import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "rank", "world_size"]

BACKEND = "collx"


def rank() -> int:
    """This process's rank in MPI_COMM_WORLD."""
    return _C.world_rank()


def world_size() -> int:
    """The number of processes in MPI_COMM_WORLD."""
    return _C.world_size()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _set_rendezvous_environment() -> None:
    """RANK, WORLD_SIZE, LOCAL_RANK from MPI; MASTER_ADDR/PORT: rank 0's host and a free port."""
    mpi_rank, mpi_size = _C.world_rank(), _C.world_size()
    os.environ.setdefault("RANK", str(mpi_rank))
    os.environ.setdefault("WORLD_SIZE", str(mpi_size))
    local_rank = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID"))
    if local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", local_rank)
    # Every rank takes part in the broadcast (the decision must not differ between ranks).
    offer = f"{socket.gethostname()} {_free_port()}" if mpi_rank == 0 else ""
    host, port = _C.broadcast_string(offer, 0).split()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1" if host == socket.gethostname() else host)
    os.environ.setdefault("MASTER_PORT", port)


def _create_process_group(backend_options, pg_options=None):
    if pg_options is not None:
        raise RuntimeError("collx backend: takes no pg_options")
    return _C.create_process_group(
        backend_options.group_rank,
        backend_options.group_size,
        list(backend_options.global_ranks_in_group),
    )


_C.initialize()
atexit.register(_C.finalize)
_set_rendezvous_environment()
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True,
                                  devices=_C.devices())

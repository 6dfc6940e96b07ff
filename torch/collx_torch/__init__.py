"""collx as a torch.distributed backend.

    import collx_torch                       # registers the backend "collx"
    import torch.distributed as dist
    dist.init_process_group("collx")         # mpirun/srun: rank and size from MPI; torchrun: env://

Started by an MPI launcher (mpirun, mpiexec, srun), importing this package initialises MPI
(unless the program already did) and, where they are not set, sets the environment variables
that torch's default ``env://`` rendezvous reads (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) from MPI, so the same script also runs torch's own backends (gloo); collx's rank is
the MPI rank. Started by torchrun (TORCHELASTIC_RUN_ID set, no MPI launcher's variables), each
process is an MPI job of its own: the first ``init_process_group("collx")`` joins them into one
MPI world through torch's rendezvous store (rank 0 opens an MPI port; with Open MPI, whose
singletons need a PMIx server to connect, rank 0 also starts ``ompi-server``), ordered by
torch's ranks, so collx's rank is torchrun's RANK. Either way the backend is registered with
``torch.distributed.Backend.register_backend``, and MPI is finalised at interpreter exit.
"""

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time

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


# The variables an MPI launcher sets (Open MPI's mpirun, MPICH's hydra, srun with PMI or PMIx).
_MPI_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                           "MPI_LOCALNRANKS")


def _started_by_torchrun() -> bool:
    return ("TORCHELASTIC_RUN_ID" in os.environ
            and not any(v in os.environ for v in _MPI_LAUNCHER_VARIABLES))


_ompi_server = None


def _join_through_store(store, rank: int, size: int) -> None:
    """torchrun's processes, each an MPI singleton, join one MPI world (module docstring)."""
    global _ompi_server
    if size > 1 and "Open MPI" in _C.mpi_library():
        # Open MPI's singletons connect through a PMIx server: rank 0 starts one for the job.
        if rank == 0:
            server = shutil.which("ompi-server")
            if server is None:
                raise RuntimeError("collx backend: torchrun with Open MPI needs ompi-server "
                                   "(Debian: openmpi-bin) on PATH")
            uri_file = os.path.join(tempfile.mkdtemp(prefix="collx-"), "ompi-server.uri")
            _ompi_server = subprocess.Popen([server, "--no-daemonize", "-r", uri_file])
            deadline = time.time() + 60
            while not (os.path.exists(uri_file) and os.path.getsize(uri_file) > 0):
                if _ompi_server.poll() is not None or time.time() > deadline:
                    raise RuntimeError("collx backend: ompi-server did not start")
                time.sleep(0.01)
            time.sleep(0.05)  # the whole line written
            with open(uri_file) as f:
                store.set("collx/ompi-server", f.read().strip())
        os.environ["OMPI_MCA_pmix_server_uri"] = store.get("collx/ompi-server").decode()
    _C.initialize_mpi()
    if size > 1 and rank == 0:
        store.set("collx/port", _C.open_port())
    port = store.get("collx/port").decode() if size > 1 else ""
    _C.join(port, rank, size)


def _create_process_group(backend_options, pg_options=None):
    if pg_options is not None:
        raise RuntimeError("collx backend: takes no pg_options")
    if not _C.initialized():
        if list(backend_options.global_ranks_in_group):
            raise RuntimeError("collx backend: the default process group must be made first")
        _join_through_store(backend_options.store, backend_options.group_rank,
                            backend_options.group_size)
    return _C.create_process_group(
        backend_options.group_rank,
        backend_options.group_size,
        list(backend_options.global_ranks_in_group),
    )


def _shutdown() -> None:
    _C.finalize()
    if _ompi_server is not None:
        _ompi_server.terminate()
        _ompi_server.wait()


atexit.register(_shutdown)
if not _started_by_torchrun():
    _C.initialize()
    _set_rendezvous_environment()
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True,
                                  devices=_C.devices())

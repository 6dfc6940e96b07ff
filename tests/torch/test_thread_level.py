#!/usr/bin/env python3
"""The collx backend refuses, with an error that says why, an MPI initialised below
MPI_THREAD_MULTIPLE (its completion thread calls MPI beside the caller's thread).

The application initialises MPI itself at MPI_THREAD_FUNNELED (through ctypes, from the MPI
library the build uses: COLLX_TEST_LIBMPI) before importing collx_torch: the import must raise a
RuntimeError naming both levels, having made and sent nothing, and leave MPI to the application.

    COLLX_TEST_LIBMPI=/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so PYTHONPATH=build/torch \\
        mpirun -np 1 build-venv/bin/python tests/torch/test_thread_level.py
"""
import ctypes
import os
import sys

MPI_THREAD_FUNNELED = 1  # the same value in Open MPI's and MPICH's mpi.h
MPI_THREAD_MULTIPLE = 3
libmpi = ctypes.CDLL(os.environ["COLLX_TEST_LIBMPI"], mode=ctypes.RTLD_GLOBAL)
provided = ctypes.c_int(-1)
if libmpi.MPI_Init_thread(None, None, MPI_THREAD_FUNNELED, ctypes.byref(provided)) != 0:
    sys.exit("MPI_Init_thread failed")
# MPI_COMM_WORLD is a handle the C library defines differently in Open MPI and MPICH: ask
# for the rank through the environment mpirun sets instead.
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))

failures = []
if provided.value >= MPI_THREAD_MULTIPLE:
    failures.append(f"MPI gave thread level {provided.value} for MPI_THREAD_FUNNELED: nothing tested")
try:
    import collx_torch  # noqa: F401  (after MPI_Init_thread on purpose)
    failures.append("import collx_torch succeeded below MPI_THREAD_MULTIPLE")
except RuntimeError as e:
    message = str(e)
    if not all(w in message for w in ("collx backend", "MPI_THREAD_MULTIPLE", "MPI_THREAD_FUNNELED")):
        failures.append(f"the error does not say what and why: {message}")
    elif rank == 0:
        print(f"refused as expected: {message}", flush=True)

finalized = ctypes.c_int(0)
libmpi.MPI_Finalized(ctypes.byref(finalized))
if finalized.value:
    failures.append("collx_torch finalised an MPI it did not initialise")
else:
    libmpi.MPI_Finalize()
for line in failures:
    print(f"rank {rank}: {line}", flush=True)
sys.exit(1 if failures else 0)

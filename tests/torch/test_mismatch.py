#!/usr/bin/env python3
"""Calls whose tensors differ between ranks: a clear error, never a hang or a partial result.

torch requires every rank of a collective to pass tensors of one size and dtype. collx's
collectives take each rank's count on trust, so the backend first agrees on the block (one small
allreduce): where the ranks' blocks differ, every rank gets an error naming the operation, and
nothing is sent. For send/recv a receive of another size than the message is an error on the receiving
rank, whichever is larger (the sender's send completes, as in MPI and gloo). broadcast, all_reduce and reduce are
checked with COLLX_CHECK=1 only (collx's own comparison of the ranks' calls). After each case
the process group must still give the right results. Run under mpirun at 2 or more ranks:

    PYTHONPATH=build/torch mpirun -np 3 build-venv/bin/python tests/torch/test_mismatch.py

A watchdog ends every rank with exit status 2, naming the case, when a case does not finish in
time (a hang). Exit status 1 on every rank when any rank found a failure.
"""
import os
import sys
import threading
import time

import torch

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist

dist.init_process_group("collx")
RANK = dist.get_rank()
SIZE = dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
CASE_SECONDS = 60

failures = []
checks = 0
current = {"case": None, "since": time.time()}


def watchdog():
    while True:
        time.sleep(1)
        case = current["case"]
        if case is not None and time.time() - current["since"] > CASE_SECONDS:
            print(f"rank {RANK}: {case}: no result after {CASE_SECONDS} s (a hang)", flush=True)
            os._exit(2)


threading.Thread(target=watchdog, daemon=True).start()

# 256 KiB of float32 per block: all_gather's list form exchanges blocks this large point to point.
LARGE = 65536


def still_works(case):
    """The group's next collectives give the right results."""
    global checks
    checks += 1
    x = torch.arange(100, dtype=torch.float32) + RANK
    got = x.clone()
    dist.all_reduce(got)
    want = x.clone()
    dist.all_reduce(want, group=GLOO)
    if not torch.equal(got, want):
        failures.append(f"rank {RANK} {case}: all_reduce after the error differs from gloo")
    out = [torch.empty(LARGE) for _ in range(SIZE)]
    dist.all_gather(out, torch.full((LARGE,), float(RANK)))
    if any(not torch.equal(o, torch.full((LARGE,), float(r))) for r, o in enumerate(out)):
        failures.append(f"rank {RANK} {case}: all_gather after the error is wrong")


def expect_error(case, fn, *words, here=True):
    """fn() raises a RuntimeError naming collx and `words` where `here`, else completes."""
    global checks
    checks += 1
    current.update(case=case, since=time.time())
    try:
        fn()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    current["case"] = None
    if here and raised is None:
        failures.append(f"rank {RANK} {case}: no error")
    elif here and not all(w in raised for w in ("collx",) + words):
        failures.append(f"rank {RANK} {case}: error without {words}: {raised}")
    elif not here and raised is not None:
        failures.append(f"rank {RANK} {case}: unexpected error: {raised}")
    elif raised is not None and os.environ.get("COLLX_TEST_VERBOSE"):
        print(f"rank {RANK} {case}: {raised}", flush=True)
    still_works(case)


def per_rank(n0, n_other, dtype=torch.float32):
    """Rank 0's count n0, the others' n_other."""
    return torch.ones(n0 if RANK == 0 else n_other, dtype=dtype)


def test_all_gather():
    for name, n0, n1 in (("small blocks", 4, 5), ("exchanged blocks", LARGE, LARGE + 1000),
                         ("blocks either side of the exchange", 1000, LARGE + 1000),
                         ("exchanged blocks, smaller elsewhere", LARGE + 1000, LARGE)):
        x = per_rank(n0, n1)
        for mode in ("blocking", "async"):
            out = [torch.empty_like(x) for _ in range(SIZE)]

            def call():
                work = dist.all_gather(out, x, async_op=mode == "async")
                if work is not None:
                    work.wait()

            expect_error(f"all_gather {name} {mode}", call, "all_gather", "differ")
    x = per_rank(8, 8, torch.float32) if RANK == 0 else torch.ones(8, dtype=torch.int32)
    expect_error("all_gather dtypes", lambda: dist.all_gather([torch.empty_like(x) for _ in range(SIZE)], x),
                 "all_gather", "differ")
    x = per_rank(6, 7)
    expect_error("all_gather_into_tensor",
                 lambda: dist.all_gather_into_tensor(torch.empty(x.numel() * SIZE), x),
                 "all_gather_into_tensor", "differ")


def test_gather_scatter():
    for n0, n1 in ((10, 12), (LARGE, LARGE // 2)):
        x = per_rank(n0, n1)
        gather_list = [torch.empty_like(x) for _ in range(SIZE)] if RANK == 0 else None
        expect_error(f"gather {n0}/{n1}", lambda: dist.gather(x, gather_list, dst=0), "gather",
                     "differ")
        out = per_rank(n0, n1)
        scatter_list = [torch.ones_like(out) for _ in range(SIZE)] if RANK == 0 else None
        expect_error(f"scatter {n0}/{n1}", lambda: dist.scatter(out, scatter_list, src=0),
                     "scatter", "differ")


def test_reduce_scatter():
    out = per_rank(10, 11)
    expect_error("reduce_scatter list",
                 lambda: dist.reduce_scatter(out, [torch.ones_like(out) for _ in range(SIZE)]),
                 "reduce_scatter", "differ")
    expect_error("reduce_scatter_tensor",
                 lambda: dist.reduce_scatter_tensor(out, torch.ones(out.numel() * SIZE)),
                 "reduce_scatter_tensor", "differ")


def test_all_to_all():
    n = 4 if RANK == 0 else 5
    expect_error("all_to_all",
                 lambda: dist.all_to_all([torch.empty(n) for _ in range(SIZE)],
                                         [torch.ones(n) for _ in range(SIZE)]),
                 "all_to_all", "differ")
    expect_error("all_to_all_single",
                 lambda: dist.all_to_all_single(torch.empty(n * SIZE), torch.ones(n * SIZE)),
                 "all_to_all_single", "differ")


def test_send_recv():
    # A recv whose tensor differs from the message: an error on the receiving rank that names
    # the operation and both sizes (the message is received whole and dropped, never cut short or
    # filled in part), none on the sender (as in MPI and gloo). Smaller and larger receives,
    # another dtype, at eager and at large sizes (a large truncated MPI receive crashed Open MPI).
    cases = [(n, m, torch.float32) for n in (2, 100, 1 << 20) for m in (n // 2, n + 1)]
    cases.append((100, 100, torch.float64))
    for n, m, dtype in cases:
        if RANK == 0:
            expect_error(f"send {n} to a recv of {m} {dtype}",
                         lambda: dist.send(torch.ones(n), dst=1), here=False)
        elif RANK == 1:
            expect_error(f"recv {m} {dtype} of a send of {n}",
                         lambda: dist.recv(torch.empty(m, dtype=dtype), src=0), "recv:",
                         f"holds {n} elements")
        else:
            still_works(f"send/recv {n}/{m}")
    # Then matching ones, several in flight on one tag, received in the order sent.
    if RANK == 0:
        works = [dist.isend(torch.full((k,), float(k)), dst=1) for k in (3, 70000, 5)]
        for w in works:
            w.wait()
    elif RANK == 1:
        bufs = [torch.empty(k) for k in (3, 70000, 5)]
        works = [dist.irecv(b, src=0) for b in bufs]
        for w in reversed(works):
            w.wait()
        global checks
        checks += 1
        if any(not torch.equal(b, torch.full_like(b, float(b.numel()))) for b in bufs):
            failures.append(f"rank 1 send/recv: several receives in flight got the wrong messages")


def test_single_tensor():
    """broadcast, all_reduce and reduce do not agree on the size first (their latency is the
    point): with COLLX_CHECK=1 collx compares the ranks' calls before moving data, and every rank
    gets an error. Without it these cases are not run (one rank would get a truncation error,
    another a partial result)."""
    if os.environ.get("COLLX_CHECK") != "1":
        return
    for n0, n1 in ((4, 5), (LARGE, LARGE + 1)):
        t = per_rank(n0, n1)
        expect_error(f"all_reduce {n0}/{n1}", lambda: dist.all_reduce(t), "all_reduce", "COLLX_CHECK")
        expect_error(f"broadcast {n0}/{n1}", lambda: dist.broadcast(t, 0), "broadcast", "COLLX_CHECK")
        expect_error(f"reduce {n0}/{n1}", lambda: dist.reduce(t, 0), "reduce", "COLLX_CHECK")


TESTS = [test_all_gather, test_gather_scatter, test_reduce_scatter, test_all_to_all,
         test_send_recv, test_single_tensor]

if __name__ == "__main__":
    if SIZE < 2:
        print("test_mismatch.py needs 2 or more ranks", flush=True)
        sys.exit(1)
    selected = [t for t in TESTS if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]]
    for test in selected:
        start = time.time()
        test()
        if RANK == 0:
            print(f"{test.__name__}: {time.time() - start:.2f} s", flush=True)
    total = torch.tensor([len(failures)])
    dist.all_reduce(total, group=GLOO)
    for line in failures[:50]:
        print(line, flush=True)
    if RANK == 0:
        print(f"np={SIZE}: {checks} checks per rank, {int(total)} failures in all", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if int(total) else 0)

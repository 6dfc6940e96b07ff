#!/usr/bin/env python3
"""collx's torch.distributed backend against gloo, the reference, in one job.

Every operation x dtype x reduce op, blocking, async (work.wait()) and on non-contiguous or
shared-memory (in-place) tensors; sub-groups made by new_group; error cases, after which the
process group must still work. Run under mpirun at any rank count:

    PYTHONPATH=build/torch mpirun -np 3 build-venv/bin/python tests/torch/test_ops.py

The inputs are small integers (-2..2, 0..4 for uint8), so every SUM, PRODUCT, MIN and MAX is
exact in every dtype and summation order: those results must equal gloo's bit for bit. AVG is
gloo's exact float64 sum divided by the rank count and rounded once; collx's may differ by one
rounding (it scales in the tensor's precision): within one epsilon of the dtype. Where gloo lacks
something it is composed from what it has, on the same values: int16, uint16-64 through int64
(exact, then cast back with the same wrap-around), PREMUL_SUM through a float64 SUM of the
scaled values, AVG through a float64 SUM; the main loops also take bfloat16 through float32 and
reduce_scatter through all_reduce, as they did for gloo versions that lacked them.

Exit status 1 on every rank when any rank found a mismatch.
"""
import os
import sys
import threading
import time
from datetime import timedelta

import torch

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist
from torch.distributed import ReduceOp

dist.init_process_group("collx")
RANK = dist.get_rank()
SIZE = dist.get_world_size()
GLOO = dist.new_group(backend="gloo")

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
DTYPES = FLOATING + (torch.int8, torch.uint8, torch.int32, torch.int64)
OPS = {"SUM": ReduceOp.SUM, "AVG": ReduceOp.AVG, "PRODUCT": ReduceOp.PRODUCT,
       "MIN": ReduceOp.MIN, "MAX": ReduceOp.MAX}
# 40000 elements: past the small-message algorithms, through collx's pipelined ones.
COUNTS = (1, 7, 40000)
# How a tensor reaches the operation: as is, async (work.wait()), or a non-contiguous view.
FORMS = ("blocking", "async", "strided")


def forms(n, *extra):
    """The forms to run at n elements: all of them at the small counts; at the large one (whose
    pipelined path does not depend on how the tensor arrived) the plain blocking call."""
    return ("blocking",) if n == COUNTS[-1] else FORMS + extra
UNTOUCHED = 99  # the elements beside a strided view, which no operation may write

failures = []
checks = 0


def values(n, dtype, salt=0, rank=RANK):
    v = (torch.arange(n, dtype=torch.int64) * 7 + 3 * rank + salt) % 5
    if dtype != torch.uint8:
        v -= 2
    return v.to(dtype)


def shaped(t, form):
    """t itself, or (form "strided") a non-contiguous view with t's values."""
    if form != "strided":
        return t
    base = torch.full((t.numel(), 2), UNTOUCHED, dtype=t.dtype)
    base[:, 0] = t
    return base[:, 0]


def call(fn, form, *args, **kwargs):
    if form == "async":
        work = fn(*args, async_op=True, **kwargs)
        work.wait()
    else:
        fn(*args, **kwargs)


def check(name, got, want, op=None):
    global checks
    checks += 1
    if got._base is not None and got.dim() == 1 and got.stride(0) == 2:
        beside = got._base[:, 1]
        if not torch.all(beside == UNTOUCHED):
            failures.append(f"rank {RANK} {name}: wrote beside the strided view")
    if op == "AVG" and want.dtype.is_complex:
        got, want = torch.view_as_real(got.contiguous()), torch.view_as_real(want)
    if op == "AVG":
        eps = torch.finfo(want.dtype).eps
        ok = got.dtype == want.dtype and torch.allclose(got.double(), want.double(), rtol=eps, atol=0)
    else:
        ok = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    if not ok:
        failures.append(f"rank {RANK} {name}: collx {got.reshape(-1)[:6].tolist()} "
                        f"gloo {want.reshape(-1)[:6].tolist()}")


def through_gloo(dtype):
    """The dtype gloo computes a reference in: bfloat16 (which gloo lacks) goes through float32."""
    return torch.float32 if dtype == torch.bfloat16 else dtype


def as_gloo(x):
    """A copy of x in the dtype gloo computes its reference in."""
    return x.to(through_gloo(x.dtype), copy=True)


def gloo_all_reduce(x, opname, group=GLOO):
    if opname == "AVG":
        r = x.to(torch.float64, copy=True)
        dist.all_reduce(r, ReduceOp.SUM, group=group)
        return (r / dist.get_world_size(group)).to(x.dtype)
    r = as_gloo(x)
    dist.all_reduce(r, OPS[opname], group=group)
    return r.to(x.dtype)


def gloo_all_gather(x, group=GLOO):
    r = as_gloo(x)
    out = [torch.empty_like(r) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, r, group=group)
    return [o.to(x.dtype) for o in out]


def reduce_ops(dtype):
    return [name for name in OPS if name != "AVG" or dtype.is_floating_point]


# ---------------------------------------------------------------- reductions

def test_all_reduce():
    for dtype in DTYPES:
        for opname in reduce_ops(dtype):
            for n in COUNTS:
                x = values(n, dtype)
                want = gloo_all_reduce(x, opname)
                for form in forms(n):
                    got = shaped(x.clone(), form)
                    call(dist.all_reduce, form, got, op=OPS[opname])
                    check(f"all_reduce {dtype} {opname} n={n} {form}", got, want, opname)


def test_all_reduce_coalesced():
    for dtype in DTYPES:
        xs = [values(n, dtype, salt=i) for i, n in enumerate((3, 1, 40000))]
        got = [x.clone() for x in xs]
        dist.all_reduce_coalesced(got, op=ReduceOp.MAX)
        for i, x in enumerate(xs):
            check(f"all_reduce_coalesced {dtype} MAX tensor {i}", got[i], gloo_all_reduce(x, "MAX"))


def test_reduce():
    root = SIZE - 1
    for dtype in DTYPES:
        for opname in reduce_ops(dtype):
            for n in COUNTS[1:]:
                x = values(n, dtype)
                want = gloo_all_reduce(x, opname)
                for form in forms(n):
                    got = shaped(x.clone(), form)
                    call(dist.reduce, form, got, dst=root, op=OPS[opname])
                    if RANK == root:
                        check(f"reduce {dtype} {opname} n={n} {form}", got, want, opname)
                    else:
                        check(f"reduce {dtype} {opname} n={n} {form} (non-root input)", got, x)


def test_reduce_scatter():
    for dtype in DTYPES:
        for opname in reduce_ops(dtype):
            for n in COUNTS[1:]:
                inputs = [values(n, dtype, salt=i) for i in range(SIZE)]
                want = gloo_all_reduce(torch.cat(inputs), opname).chunk(SIZE)[RANK]
                for form in forms(n, "one block"):
                    if form == "one block":
                        # The list as blocks of one tensor (collx reads it in place), the output
                        # the rank's own block of it.
                        block = torch.cat(inputs)
                        listed = list(block.chunk(SIZE))
                        got = listed[RANK]
                    else:
                        listed = [shaped(t.clone(), form) for t in inputs]
                        got = shaped(torch.zeros(n, dtype=dtype), form)
                    call(dist.reduce_scatter, form, got, listed, op=OPS[opname])
                    check(f"reduce_scatter {dtype} {opname} n={n} {form}", got, want, opname)
                # The single-tensor form, separate and in place (output = own block of input).
                flat = torch.cat(inputs)
                got = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(got, flat.clone(), op=OPS[opname])
                check(f"reduce_scatter_tensor {dtype} {opname} n={n}", got, want, opname)
                inplace = flat.clone()
                own = inplace.narrow(0, RANK * n, n)
                work = dist.reduce_scatter_tensor(own, inplace, op=OPS[opname], async_op=True)
                work.wait()
                check(f"reduce_scatter_tensor {dtype} {opname} n={n} in place async", own, want,
                      opname)


# ---------------------------------------------------------------- data movement

def test_broadcast():
    for dtype in DTYPES:
        for root in sorted({0, SIZE - 1}):
            for n in COUNTS:
                x = values(n, dtype)
                want = as_gloo(x)
                dist.broadcast(want, src=root, group=GLOO)
                want = want.to(dtype)
                for form in forms(n):
                    got = shaped(x.clone(), form)
                    call(dist.broadcast, form, got, src=root)
                    check(f"broadcast {dtype} root={root} n={n} {form}", got, want)


def test_all_gather():
    for dtype in DTYPES:
        for n in COUNTS:
            x = values(n, dtype)
            want = gloo_all_gather(x)
            for form in forms(n, "one block"):
                if form == "one block":
                    block = torch.zeros(SIZE * n, dtype=dtype)
                    out = list(block.chunk(SIZE))
                    out[RANK].copy_(x)
                    src = out[RANK]  # in place: the input is the rank's own slot
                else:
                    out = [shaped(torch.zeros(n, dtype=dtype), form) for _ in range(SIZE)]
                    src = shaped(x.clone(), form)
                call(dist.all_gather, form, out, src)
                for r in range(SIZE):
                    check(f"all_gather {dtype} n={n} {form} block {r}", out[r], want[r])
            # The single-tensor form: separate, async, strided output, in place.
            cat = torch.cat(want)
            for form in forms(n, "in place"):
                if form == "in place":
                    got = torch.zeros(SIZE * n, dtype=dtype)
                    src = got.narrow(0, RANK * n, n)
                    src.copy_(x)
                else:
                    got = shaped(torch.zeros(SIZE * n, dtype=dtype), form)
                    src = x.clone()
                call(dist.all_gather_into_tensor, form, got, src)
                check(f"all_gather_into_tensor {dtype} n={n} {form}", got, cat)


def test_all_gather_exchange():
    """all_gather's list form from 256 KiB a block: each rank's block broadcast straight into its
    tensor, one broadcast per rank (torch/src/process_group.hpp, allgather_broadcasts). Layouts differ
    between ranks (one rank one block, the others separate tensors, one of them strided, the
    input its own slot or not) and must still meet; several in flight at once, with the caller's
    own isend/irecv beside them on the same ranks; the last tag the caller may use still works."""
    n_large = {torch.float32: 70000, torch.int8: 300000, torch.float64: 40000}
    for dtype, n in n_large.items():
        x = values(n, dtype)
        want = gloo_all_gather(x)
        for layout in ("separate", "mixed", "in place"):
            if layout == "in place" or (layout == "mixed" and RANK == 0):
                block = torch.zeros(SIZE * n, dtype=dtype)
                out = list(block.chunk(SIZE))
                if layout == "in place":
                    out[RANK].copy_(x)
                src = out[RANK] if layout == "in place" else x.clone()
            else:
                out = [torch.zeros(n, dtype=dtype) for _ in range(SIZE)]
                if layout == "mixed":
                    out[(RANK + 1) % SIZE] = shaped(torch.zeros(n, dtype=dtype), "strided")
                src = x.clone()
            dist.all_gather(out, src)
            for r in range(SIZE):
                check(f"all_gather exchange {dtype} n={n} {layout} block {r}", out[r], want[r])
    # In flight together, with point-to-point messages of the caller's between them.
    n = 100000
    xs = [values(n, torch.float32, salt=i) for i in range(3)]
    wants = [gloo_all_gather(x) for x in xs]
    outs = [[torch.zeros(n) for _ in range(SIZE)] for _ in xs]
    mine = torch.full((n,), float(RANK))
    got = torch.zeros(n)
    works = [dist.all_gather(outs[0], xs[0], async_op=True)]
    if SIZE > 1:
        works += [dist.irecv(got, (RANK - 1) % SIZE, tag=32765),
                  dist.isend(mine, (RANK + 1) % SIZE, tag=32765)]
    works += [dist.all_gather(o, x, async_op=True) for o, x in zip(outs[1:], xs[1:])]
    for w in works:
        w.wait()
    for i, (out, want) in enumerate(zip(outs, wants)):
        for r in range(SIZE):
            check(f"all_gather exchange in flight {i} block {r}", out[r], want[r])
    if SIZE > 1:
        check("isend/irecv beside the exchange", got, torch.full((n,), float((RANK - 1) % SIZE)))


def test_staging():
    """Staging memory is reused from call to call (torch/src/process_group.hpp, StagingPool): calls
    in flight together must each stage in memory of their own, and a reused buffer must serve
    another dtype and a larger size. Six list-form all_gathers of separate tensors at once (more
    than the pool keeps: some stage in memory of their own), of three dtypes and two sizes, then
    again one by one, larger, smaller, and reduce_scatter lists and a strided all_reduce between."""
    shapes = [(torch.float32, 3000), (torch.int64, 5000), (torch.float16, 700),
              (torch.float32, 12000), (torch.int8, 3001), (torch.float64, 2500)]
    for rnd in range(2):
        pending = []
        for i, (dtype, n) in enumerate(shapes):
            x = values(n, dtype, salt=i + rnd)
            out = [torch.zeros(n, dtype=dtype) for _ in range(SIZE)]
            pending.append((f"staging round {rnd} all_gather {i} {dtype} n={n}", x, out,
                            dist.all_gather(out, x, async_op=True)))
            if rnd == 1:
                pending[-1][3].wait()  # one at a time: each reuses the same buffer
        for name, x, out, work in pending:
            work.wait()
            for r, (o, w) in enumerate(zip(out, gloo_all_gather(x))):
                check(f"{name} block {r}", o, w)
        for n in (40000, 10):
            inputs = [values(n, torch.float32, salt=i) for i in range(SIZE)]
            got = torch.zeros(n)
            dist.reduce_scatter(got, [t.clone() for t in inputs])
            want = gloo_all_reduce(torch.cat(inputs), "SUM").chunk(SIZE)[RANK]
            check(f"staging round {rnd} reduce_scatter n={n}", got, want)
            x = values(n, torch.float64)
            got = shaped(x.clone(), "strided")
            dist.all_reduce(got)
            check(f"staging round {rnd} all_reduce strided n={n}", got, gloo_all_reduce(x, "SUM"))


def test_gather_scatter():
    for dtype in DTYPES:
        for root in sorted({0, SIZE - 1}):
            for n in COUNTS[1:]:
                x = values(n, dtype)
                r = as_gloo(x)
                want = [torch.empty_like(r) for _ in range(SIZE)] if RANK == root else None
                dist.gather(r, want, dst=root, group=GLOO)
                for form in forms(n):
                    out = ([shaped(torch.zeros(n, dtype=dtype), form) for _ in range(SIZE)]
                           if RANK == root else None)
                    call(dist.gather, form, shaped(x.clone(), form), out, dst=root)
                    if RANK == root:
                        for i in range(SIZE):
                            check(f"gather {dtype} root={root} n={n} {form} block {i}", out[i],
                                  want[i].to(dtype))
                pieces = [values(n, dtype, salt=i, rank=root) for i in range(SIZE)]
                want = torch.empty(n, dtype=through_gloo(dtype))
                dist.scatter(want, [as_gloo(p) for p in pieces] if RANK == root
                             else None, src=root, group=GLOO)
                for form in forms(n):
                    got = shaped(torch.zeros(n, dtype=dtype), form)
                    listed = [shaped(p.clone(), form) for p in pieces] if RANK == root else None
                    call(dist.scatter, form, got, listed, src=root)
                    check(f"scatter {dtype} root={root} n={n} {form}", got, want.to(dtype))


def test_all_to_all():
    for dtype in DTYPES:
        for n in COUNTS[1:]:
            # Rows of 3 elements, n rows to every rank.
            x = values(SIZE * n * 3, dtype).view(SIZE * n, 3)
            r = as_gloo(x)
            want = torch.empty_like(r)
            dist.all_to_all_single(want, r, group=GLOO)
            want = want.to(dtype)
            for form in forms(n, "equal splits"):
                got = torch.zeros_like(x)
                if form == "equal splits":
                    dist.all_to_all_single(got, x.clone(), [n] * SIZE, [n] * SIZE)
                elif form == "strided":
                    # A transposed view: non-contiguous input and output.
                    src = x.t().contiguous().t()
                    dst = torch.zeros(3, SIZE * n, dtype=dtype).t()
                    dist.all_to_all_single(dst, src)
                    got = dst
                else:
                    call(dist.all_to_all_single, form, got, x.clone())
                check(f"all_to_all_single {dtype} n={n} {form}", got, want)
            # The list form.
            inputs = list(x.clone().chunk(SIZE))
            out = [torch.zeros(n, 3, dtype=dtype) for _ in range(SIZE)]
            dist.all_to_all(out, inputs)
            for i, (o, w) in enumerate(zip(out, want.chunk(SIZE))):
                check(f"all_to_all {dtype} n={n} block {i}", o, w)


def test_send_recv():
    if SIZE == 1:
        return
    right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    for dtype in DTYPES:
        for n in COUNTS:
            mine = values(n, dtype, salt=11)
            want = values(n, dtype, salt=11, rank=left)
            # isend / irecv in a ring.
            got = torch.zeros(n, dtype=dtype)
            reqs = [dist.isend(mine, right, tag=5), dist.irecv(got, left, tag=5)]
            for req in reqs:
                req.wait()
            check(f"isend/irecv {dtype} n={n}", got, want)
            # Blocking send / recv: even ranks send first, into a strided tensor.
            got = shaped(torch.zeros(n, dtype=dtype), "strided")
            if RANK % 2 == 0:
                dist.send(mine, right, tag=7)
                dist.recv(got, left, tag=7)
            else:
                dist.recv(got, left, tag=7)
                dist.send(mine, right, tag=7)
            check(f"send/recv {dtype} n={n} strided", got, want)


def test_barrier():
    # Rank 0 arrives late: nobody may leave before it arrived.
    for form in ("blocking", "async"):
        arrived = time.time()
        if RANK == 0:
            time.sleep(0.2)
            arrived = time.time()
        call(dist.barrier, form)
        left = time.time()
        times = torch.tensor([arrived, left], dtype=torch.float64)
        every = [torch.empty(2, dtype=torch.float64) for _ in range(SIZE)]
        dist.all_gather(every, times, group=GLOO)
        global checks
        checks += 1
        if min(t[1].item() for t in every) < every[0][0].item():
            failures.append(f"rank {RANK} barrier {form}: a rank left before rank 0 arrived")


def wait_done(future, what, seconds=120):
    """Polls future.done() (which drives nothing) until it is true; False after `seconds`."""
    deadline = time.time() + seconds
    while not future.done():
        if time.time() > deadline:
            failures.append(f"rank {RANK} {what}: not complete after {seconds} s")
            return False
        time.sleep(0.001)
    return True


def test_completion():
    """A work's future completes on its own (the completion thread), not when it is asked for.

    Rank 0 starts a 4 MiB all_reduce while the other ranks are held back (in a gloo broadcast),
    so its request cannot complete yet: the future get_future() returns and the one chained on it
    with then() (as DDP's reducer chains on its gradient buckets) must not be complete. Rank 0
    then lets the others go and only looks at the chained future's done(), which drives nothing:
    it completes from the completion thread, whose callback sees the reduced tensor. Then a batch
    of async operations of several kinds, each chained on and none waited on, must all complete
    in the same way, with gloo's results."""
    global checks
    n = 1 << 20
    x = values(n, torch.float32)
    want = gloo_all_reduce(x, "SUM")
    main_thread = threading.get_ident()
    seen = {}

    def callback(future):
        seen["thread"] = threading.get_ident()
        seen["value"] = future.value()[0].clone()
        return future.value()

    go = torch.zeros(1)
    if RANK != 0:
        dist.broadcast(go, 0, group=GLOO)  # held back until rank 0 has looked
    got = x.clone()
    work = dist.all_reduce(got, async_op=True)
    future = work.get_future()
    chained = future.then(callback)
    if RANK == 0 and SIZE > 1:
        checks += 1
        if future.done() or chained.done() or work.is_completed():
            failures.append(f"rank 0 completion: the future of an all_reduce the other ranks have "
                            f"not joined is complete (done {future.done()}, chained "
                            f"{chained.done()}, work {work.is_completed()})")
        dist.broadcast(go, 0, group=GLOO)
    checks += 1
    if wait_done(chained, "all_reduce's chained future"):
        check("completion: the chained future's value", seen["value"], want)
        check("completion: the tensor", got, want)
        # Elsewhere the request may have completed before then() was called (the callback then
        # runs at once, on the caller's thread).
        if RANK == 0 and SIZE > 1 and seen["thread"] == main_thread:
            failures.append(f"rank {RANK} completion: the callback ran on the caller's thread")
        if not work.is_completed():
            failures.append(f"rank {RANK} completion: future done, work not completed")
    work.wait()  # returns at once; a second wait too
    work.wait()

    # Several kinds at once, none waited on.
    y = values(1000, torch.float64)
    reduced = y.clone()
    gathered = torch.empty(1000 * SIZE, dtype=torch.float64)
    sent = torch.full((5000,), float(RANK), dtype=torch.float32)
    received = torch.empty(5000, dtype=torch.float32)
    strided = shaped(y.clone(), "strided")  # copied back by whoever completes it
    works = [dist.all_reduce(reduced, op=ReduceOp.MAX, async_op=True),
             dist.all_gather_into_tensor(gathered, y, async_op=True),
             dist.broadcast(strided, 0, async_op=True)]
    if SIZE > 1:
        works += [dist.isend(sent, (RANK + 1) % SIZE), dist.irecv(received, (RANK - 1) % SIZE)]
    chained = [w.get_future().then(lambda f: f.value()) for w in works]
    for i, c in enumerate(chained):
        checks += 1
        wait_done(c, f"async batch future {i}")
    check("completion: all_reduce MAX", reduced, gloo_all_reduce(y, "MAX"))
    check("completion: all_gather_into_tensor", gathered, torch.cat(gloo_all_gather(y)))
    check("completion: broadcast strided", strided, values(1000, torch.float64, rank=0))
    if SIZE > 1:
        check("completion: irecv", received,
              torch.full((5000,), float((RANK - 1) % SIZE), dtype=torch.float32))
    for w in works:
        w.wait()


def test_objects():
    # The pickled-object helpers: all_gather and broadcast of uint8 and int64 tensors underneath.
    global checks
    mine = {"rank": RANK, "name": "x" * RANK}
    gathered = [None] * SIZE
    dist.all_gather_object(gathered, mine)
    objects = [mine if RANK == SIZE - 1 else None]
    dist.broadcast_object_list(objects, src=SIZE - 1)
    checks += 2
    if gathered != [{"rank": r, "name": "x" * r} for r in range(SIZE)]:
        failures.append(f"rank {RANK} all_gather_object: {gathered}")
    if objects != [{"rank": SIZE - 1, "name": "x" * (SIZE - 1)}]:
        failures.append(f"rank {RANK} broadcast_object_list: {objects}")


# ---------------------------------------------------------------- sub-groups

def test_new_group():
    # Groups of the odd ranks and of all ranks but 0 (new_group must be called by every rank).
    for ranks in ([r for r in range(SIZE) if r % 2 == 1], list(range(1, SIZE))):
        if not ranks:
            continue
        sub = dist.new_group(ranks, backend="collx")
        ref = dist.new_group(ranks, backend="gloo")
        if RANK not in ranks:
            continue
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            for opname in ("SUM", "MAX"):
                x = values(1000, dtype)
                got = x.clone()
                dist.all_reduce(got, OPS[opname], group=sub)
                check(f"group {ranks} all_reduce {dtype} {opname}", got,
                      gloo_all_reduce(x, opname, group=ref))
            x = values(1000, dtype)
            got = x.clone()
            dist.broadcast(got, src=ranks[-1], group=sub)  # a global rank, as torch takes it
            want = as_gloo(x)
            dist.broadcast(want, src=ranks[-1], group=ref)
            check(f"group {ranks} broadcast {dtype}", got, want.to(dtype))
            out = [torch.zeros_like(x) for _ in ranks]
            dist.all_gather(out, x, group=sub)
            for r, (o, w) in enumerate(zip(out, gloo_all_gather(x, group=ref))):
                check(f"group {ranks} all_gather {dtype} block {r}", o, w)


def test_unwatched():
    """Small async works nobody waits on, nor asks a future of, still complete on their own.

    The completion thread is not woken for each small work (a blocking call's caller waits on it
    at once); it takes over those still in flight a tick (1 ms) later. Rank 0 starts an
    all_reduce with async_op=True and sleeps in Python, calling nothing; the others make the same
    call blocking. Rank 0's tensor must hold the result before it waits (its part completed
    without it), and the others must not have waited for its sleep."""
    global checks
    if SIZE == 1:
        return
    pause = 0.5
    for n in (2, 1000, 8000):  # 8 B, 4 KiB, 32 KiB
        x = values(n, torch.float32, salt=n)
        want = gloo_all_reduce(x, "SUM")
        got = x.clone()
        dist.barrier(group=GLOO)
        start = time.time()
        if RANK == 0:
            work = dist.all_reduce(got, async_op=True)
            time.sleep(pause)
            checks += 1
            if not torch.equal(got, want):
                failures.append(f"rank 0 unwatched all_reduce of {n}: no result after {pause} s "
                                f"without a wait")
            work.wait()
        else:
            dist.all_reduce(got)
            elapsed = time.time() - start
            checks += 1
            if elapsed > 0.9 * pause:
                failures.append(f"rank {RANK} unwatched all_reduce of {n}: took {elapsed:.3f} s, "
                                f"held up by rank 0's sleep")
        check(f"unwatched all_reduce of {n}", got, want)


def test_recv_then_agree():
    """A recv in flight while this rank waits in a call whose ranks agree on the block first
    (all_gather): the recv's data receive must still be posted meanwhile (by the completion
    thread), since the sender's blocking send of a large message needs it before the sender
    joins the all_gather; the same with a blocking all_reduce. gloo runs these programs; so must
    collx."""
    global checks
    if SIZE == 1:
        return
    n = 1 << 20  # 4 MiB: sent with a rendezvous, not eagerly
    x = torch.full((4,), float(RANK))
    out = [torch.empty(4) for _ in range(SIZE)]
    if RANK == 0:
        got = torch.empty(n)
        work = dist.irecv(got, src=1)
        dist.all_gather(out, x)
        work.wait()
        check("recv then all_gather: the message", got, torch.arange(n, dtype=torch.float32))
    else:
        if RANK == 1:
            dist.send(torch.arange(n, dtype=torch.float32), dst=0)
        dist.all_gather(out, x)
    for r, o in enumerate(out):
        check(f"recv then all_gather: block {r}", o, torch.full((4,), float(r)))
    # The same with a blocking all_reduce, which does not agree first: its wait must move the
    # recv on too.
    y = torch.ones(4)
    if RANK == 0:
        got = torch.empty(n)
        work = dist.irecv(got, src=1)
        dist.all_reduce(y)
        work.wait()
        check("recv then all_reduce: the message", got, torch.arange(n, dtype=torch.float32) * 2)
    else:
        if RANK == 1:
            dist.send(torch.arange(n, dtype=torch.float32) * 2, dst=0)
        dist.all_reduce(y)
    check("recv then all_reduce: the sum", y, torch.full((4,), float(SIZE)))


def test_async_agreements():
    """Calls whose ranks agree on the block first (the list forms, gather, scatter, all_to_all)
    must not block at launch (torch/src/process_group.hpp, Sequence): each of these programs
    runs on gloo, and hung while the agreement was waited on inside the call. A watchdog ends
    every rank (exit status 2) when one does not finish in time.
      1. two async list-form calls (all_gather, reduce_scatter) issued before either is waited
         on, then waited on in the other order, below and above the exchange's 256 KiB a block,
         and an all_reduce launched behind them;
      2. rank 0 issues an async all_gather, then a blocking recv whose message rank 1 sends
         (4 MiB: a rendezvous, which needs the receive) before its own all_gather, or after it
         (then rank 0's all_gather must be posted while rank 0 waits in its recv);
      3. async all_gathers on two groups of the same ranks, issued in one order on even ranks
         and in the other on odd ranks, then waited on."""
    done = threading.Event()

    def watchdog(seconds=90):
        if not done.wait(seconds):
            print(f"rank {RANK} test_async_agreements: no result after {seconds} s (a hang)",
                  flush=True)
            os._exit(2)

    threading.Thread(target=watchdog, daemon=True).start()
    for n in (5, 70000):
        x = values(n, torch.float32, salt=1)
        inputs = [values(n, torch.float32, salt=2 + j) for j in range(SIZE)]
        gathered = [torch.zeros(n) for _ in range(SIZE)]
        scattered = torch.zeros(n)
        summed = values(n, torch.float32, salt=9)
        w1 = dist.all_gather(gathered, x, async_op=True)
        w2 = dist.reduce_scatter(scattered, [t.clone() for t in inputs], async_op=True)
        w3 = dist.all_reduce(summed, async_op=True)
        for w in (w3, w2, w1):
            w.wait()
        for r, (o, w) in enumerate(zip(gathered, gloo_all_gather(x))):
            check(f"async agreements n={n}: all_gather block {r}", o, w)
        want = gloo_all_reduce(torch.cat(inputs), "SUM").chunk(SIZE)[RANK]
        check(f"async agreements n={n}: reduce_scatter", scattered, want)
        check(f"async agreements n={n}: all_reduce behind them", summed,
              gloo_all_reduce(values(n, torch.float32, salt=9), "SUM"))
    for send_first in ((True, False) if SIZE > 1 else ()):
        n = 1 << 20
        x = torch.full((4,), float(RANK))
        out = [torch.zeros(4) for _ in range(SIZE)]
        what = f"async all_gather, then a recv (sent {'before' if send_first else 'after'})"
        if RANK == 0:
            work = dist.all_gather(out, x, async_op=True)
            got = torch.zeros(n)
            dist.recv(got, src=1)
            work.wait()
            check(f"{what}: the message", got, torch.arange(n, dtype=torch.float32))
        else:
            if RANK == 1 and send_first:
                dist.send(torch.arange(n, dtype=torch.float32), dst=0)
            dist.all_gather(out, x, async_op=True).wait()
            if RANK == 1 and not send_first:
                dist.send(torch.arange(n, dtype=torch.float32), dst=0)
        for r, o in enumerate(out):
            check(f"{what}: block {r}", o, torch.full((4,), float(r)))
    groups = [dist.new_group(backend="collx") for _ in range(2)]
    order = groups if RANK % 2 == 0 else groups[::-1]
    xs = {id(g): values(70000 if i == 0 else 5, torch.int32, salt=i) for i, g in enumerate(groups)}
    outs = {id(g): [torch.zeros_like(xs[id(g)]) for _ in range(SIZE)] for g in groups}
    works = [dist.all_gather(outs[id(g)], xs[id(g)], group=g, async_op=True) for g in order]
    for w in works:
        w.wait()
    for g in groups:
        for r, (o, w) in enumerate(zip(outs[id(g)], gloo_all_gather(xs[id(g)]))):
            check(f"async all_gathers on two groups in either order: block {r}", o, w)
    done.set()


# ---------------------------------------------------------------- errors

def expect_error(name, fn, *words):
    global checks
    checks += 1
    try:
        fn()
    except RuntimeError as e:
        message = str(e)
        if not all(w in message for w in ("collx",) + words):
            failures.append(f"rank {RANK} {name}: error without {words}: {message}")
        return
    failures.append(f"rank {RANK} {name}: no error")


# ---------------------------------------------------------------- the rest of torch's dtypes and ops

# Beyond collx's own types: bool (uint8 MAX/MIN), complex (pairs of reals; PRODUCT folded),
# int16 and uint16-64 (folded, or collx's uint32/uint64); float8 moves but is not reduced.
MORE_DTYPES = (torch.bool, torch.int16, torch.uint16, torch.uint32, torch.uint64,
               torch.complex64, torch.complex128)
GLOO_LACKS = (torch.int16, torch.uint16, torch.uint32, torch.uint64)
ALL_OPS = dict(OPS, BAND=ReduceOp.BAND, BOR=ReduceOp.BOR, BXOR=ReduceOp.BXOR)


def more_values(n, dtype, salt=0, rank=RANK):
    v = (torch.arange(n, dtype=torch.int64) * 7 + 3 * rank + salt) % 5
    if dtype == torch.bool:
        return v % 2 == 1
    if dtype.is_complex:
        return torch.complex((v - 2).double(), (v % 3 - 1).double()).to(dtype)
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        return v.to(dtype)
    return (v - 2).to(dtype)


def more_ops(dtype):
    if dtype == torch.bool:
        return ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")
    if dtype.is_complex:
        return ("SUM", "AVG")  # torch refuses the others on complex tensors itself
    return ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


def reference_all_reduce(x, opname):
    """gloo's all_reduce of x; through int64 for the dtypes gloo lacks (exact for these values:
    the cast back wraps as the dtype's own arithmetic does)."""
    if opname == "AVG":
        r = x.to(torch.complex128 if x.dtype.is_complex else torch.float64, copy=True)
        dist.all_reduce(r, ReduceOp.SUM, group=GLOO)
        return (r / SIZE).to(x.dtype)
    r = x.to(torch.int64) if x.dtype in GLOO_LACKS else x.clone()
    dist.all_reduce(r, ALL_OPS[opname], group=GLOO)
    if x.dtype in GLOO_LACKS and opname in ("SUM", "PRODUCT"):
        bits = {torch.int16: 16, torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}[x.dtype]
        if bits < 64:
            r = r & ((1 << bits) - 1)
            if x.dtype == torch.int16:
                r = torch.where(r >= 1 << 15, r - (1 << 16), r)
    return r.to(x.dtype)


def test_more_dtypes():
    root = SIZE - 1
    for dtype in MORE_DTYPES:
        for opname in more_ops(dtype):
            for n in (7, 3000):
                x = more_values(n, dtype)
                want = reference_all_reduce(x, opname)
                for form in ("blocking", "async", "strided"):
                    got = shaped(x.clone(), form) if dtype != torch.bool or form != "strided" else x.clone()
                    call(dist.all_reduce, form, got, op=ALL_OPS[opname])
                    check(f"all_reduce {dtype} {opname} n={n} {form}", got, want, opname)
                got = x.clone()
                dist.reduce(got, dst=root, op=ALL_OPS[opname])
                check(f"reduce {dtype} {opname} n={n}", got, want if RANK == root else x, opname)
                inputs = torch.cat([more_values(n, dtype, salt=i) for i in range(SIZE)])
                want_rs = reference_all_reduce(inputs, opname).chunk(SIZE)[RANK]
                got = torch.zeros(n, dtype=dtype)
                dist.reduce_scatter_tensor(got, inputs.clone(), op=ALL_OPS[opname])
                check(f"reduce_scatter_tensor {dtype} {opname} n={n}", got, want_rs, opname)
                got = list(inputs.clone().chunk(SIZE))[RANK]  # in place, the list form
                dist.reduce_scatter(got, list(inputs.clone().chunk(SIZE)), op=ALL_OPS[opname])
                check(f"reduce_scatter {dtype} {opname} n={n}", got, want_rs, opname)
    # BAND/BOR/BXOR on collx's own integer types (folded) against gloo's.
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        for opname in ("BAND", "BOR", "BXOR"):
            x = values(3000, dtype)
            got = x.clone()
            dist.all_reduce(got, op=ALL_OPS[opname])
            want = x.clone()
            dist.all_reduce(want, op=ALL_OPS[opname], group=GLOO)
            check(f"all_reduce {dtype} {opname}", got, want)
    # PREMUL_SUM (scalar and tensor factors): the sum of the scaled values.
    for dtype in FLOATING:
        for factor in (0.5, torch.tensor([0.25], dtype=dtype)):
            x = values(3000, dtype)
            scale = float(factor) if not torch.is_tensor(factor) else float(factor.item())
            want = (x.double() * scale)
            dist.all_reduce(want, group=GLOO)
            want = want.to(dtype)
            got = x.clone()
            dist.all_reduce(got, op=dist._make_nccl_premul_sum(factor))
            check(f"all_reduce {dtype} PREMUL_SUM {scale}", got, want, "AVG")
            got = x.clone()
            dist.reduce(got, dst=root, op=dist._make_nccl_premul_sum(factor))
            check(f"reduce {dtype} PREMUL_SUM {scale}", got, want if RANK == root else x, "AVG")
            inputs = torch.cat([values(300, dtype, salt=i) for i in range(SIZE)])
            want_rs = inputs.double() * scale
            dist.all_reduce(want_rs, group=GLOO)
            got = torch.zeros(300, dtype=dtype)
            dist.reduce_scatter_tensor(got, inputs, op=dist._make_nccl_premul_sum(factor))
            check(f"reduce_scatter_tensor {dtype} PREMUL_SUM {scale}", got,
                  want_rs.to(dtype).chunk(SIZE)[RANK], "AVG")
    # Every dtype moves: broadcast, all_gather_into_tensor, all_to_all_single, send/recv.
    for dtype in MORE_DTYPES + (torch.float8_e4m3fn, torch.float8_e5m2):
        x = (more_values(1000, dtype) if not dtype.is_floating_point
             else values(1000, torch.float32).to(dtype))
        root_x = (more_values(1000, dtype, rank=0) if not dtype.is_floating_point
                  else values(1000, torch.float32, rank=0).to(dtype))
        got = x.clone()
        dist.broadcast(got, src=0)
        check(f"broadcast {dtype}", got.view(torch.uint8), root_x.view(torch.uint8))
        every = [(more_values(1000, dtype, rank=r) if not dtype.is_floating_point
                  else values(1000, torch.float32, rank=r).to(dtype)) for r in range(SIZE)]
        got = torch.empty(1000 * SIZE, dtype=dtype)
        dist.all_gather_into_tensor(got, x)
        check(f"all_gather_into_tensor {dtype}", got.view(torch.uint8),
              torch.cat(every).view(torch.uint8))
        if SIZE > 1:
            got = torch.empty(1000, dtype=dtype)
            works = [dist.isend(x, (RANK + 1) % SIZE), dist.irecv(got, (RANK - 1) % SIZE)]
            for w in works:
                w.wait()
            check(f"isend/irecv {dtype}", got.view(torch.uint8),
                  every[(RANK - 1) % SIZE].view(torch.uint8))


def test_uneven_all_to_all():
    """all_to_all_single with split sizes that differ from rank to rank (point-to-point messages
    on the backend's own tag) against gloo's, in several dtypes and row shapes, and several in
    flight at once."""
    # Rank i sends (i + j) % 3 + (j == 0) rows of 2 elements to rank j.
    def rows(i, j):
        return (i + j) % 3 + (1 if j == 0 else 0)
    send = [rows(RANK, j) for j in range(SIZE)]
    recv = [rows(i, RANK) for i in range(SIZE)]
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.complex64):
        x = more_values(sum(send) * 2, dtype).view(-1, 2) if dtype in MORE_DTYPES else \
            values(sum(send) * 2, dtype).view(-1, 2)
        want = torch.zeros(sum(recv), 2, dtype=dtype)
        dist.all_to_all_single(want, x, recv, send, group=GLOO)
        got = torch.zeros(sum(recv), 2, dtype=dtype)
        dist.all_to_all_single(got, x, recv, send)
        check(f"all_to_all_single uneven {dtype}", got, want)
    x = values(sum(send) * 5, torch.float32).view(-1, 5)
    want = torch.zeros(sum(recv), 5)
    dist.all_to_all_single(want, x, recv, send, group=GLOO)
    outs = [torch.zeros(sum(recv), 5) for _ in range(3)]
    works = [dist.all_to_all_single(o, x, recv, send, async_op=True) for o in outs]
    for i, (w, o) in enumerate(zip(works, outs)):
        w.wait()
        check(f"all_to_all_single uneven in flight {i}", o, want)


def test_monitored_barrier():
    """monitored_barrier passes when every rank comes; when the last rank comes too late, rank 0
    raises naming it, and the late rank, arriving after, raises too (rank 0's answer: failed);
    the group still works after."""
    global checks
    dist.monitored_barrier(timeout=timedelta(seconds=30))
    checks += 1
    if SIZE == 1:
        return
    late = SIZE - 1
    error = None
    if RANK == late:
        time.sleep(1.0)
    try:
        dist.monitored_barrier(timeout=timedelta(seconds=0.3), wait_all_ranks=True)
    except RuntimeError as e:
        error = str(e)
    checks += 1
    if RANK == 0 and (error is None or f"{late}" not in error or "monitoredBarrier" not in error):
        failures.append(f"rank 0 monitored_barrier: rank {late} came late, error: {error}")
    if RANK == late and error is None:
        failures.append(f"rank {late} monitored_barrier: came late and saw no error")
    dist.barrier(group=GLOO)
    x = values(100, torch.float32)
    got = x.clone()
    dist.all_reduce(got)
    check("all_reduce after monitored_barrier's failure", got, gloo_all_reduce(x, "SUM"))


def test_errors():
    f = torch.ones(4)
    expect_error("AVG on int", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                                       op=ReduceOp.AVG), "all_reduce", "AVG")
    expect_error("BAND on float", lambda: dist.all_reduce(torch.ones(4), op=ReduceOp.BAND),
                 "all_reduce", "BAND", "Float")
    expect_error("SUM on float8", lambda: dist.all_reduce(
        torch.ones(4, dtype=torch.float8_e4m3fn)), "all_reduce", "Float8_e4m3fn")
    group = dist.distributed_c10d._get_default_group()
    expect_error("MAX on complex", lambda: dist.reduce_scatter_tensor(
        torch.ones(4, dtype=torch.complex64), torch.ones(4 * SIZE, dtype=torch.complex64),
        op=ReduceOp.MAX), "MAX", "complex")
    expect_error("list length", lambda: dist.all_gather([f.clone() for _ in range(SIZE + 1)], f),
                 "all_gather", "tensors for a group of")
    # A tensor on a device the backend does not serve (torch's Python passes meta tensors to
    # kernels that do nothing: call the backend itself). CUDA tensors: where no GPU is, torch
    # itself refuses to make one ("Found no NVIDIA driver"); test_cuda.py runs where one is.
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    expect_error("meta tensor", lambda: backend.broadcast([torch.empty(4, device="meta")],
                                                          dist.BroadcastOptions()),
                 "broadcast", "meta")
    # torch's Python checks dtypes before the process group sees them: call the group itself.
    expect_error("mixed dtypes", lambda: group.allgather(
        [[torch.ones(4, dtype=torch.float64)] + [f.clone() for _ in range(SIZE - 1)]], [f]),
        "all_gather", "Double")
    expect_error("uneven blocks", lambda: dist.all_gather(
        [torch.ones(5)] + [f.clone() for _ in range(SIZE - 1)], f), "all_gather", "equal size")
    expect_error("wrong output size", lambda: dist.all_gather_into_tensor(torch.ones(4 * SIZE + 1), f),
                 "all_gather_into_tensor", "elements")
    expect_error("wrong input size", lambda: dist.reduce_scatter_tensor(f.clone(), torch.ones(3)),
                 "reduce_scatter_tensor", "elements")
    expect_error("bad root", lambda: dist.broadcast(f.clone(), src=SIZE), "broadcast")
    expect_error("recv from any source", lambda: dist.recv(f.clone()), "any source")
    expect_error("tag", lambda: dist.isend(f, (RANK + 1) % SIZE, tag=40000), "send", "tag")
    expect_error("the backend's own tag", lambda: dist.irecv(f, (RANK + 1) % SIZE, tag=32766),
                 "recv", "tag", "for itself")
    expect_error("split sizes that miss rows",
                 lambda: dist.all_to_all_single(torch.ones(SIZE + 2), torch.ones(SIZE + 2),
                                                [1] * SIZE, [1] * SIZE),
                 "all_to_all_single", "add up to")
    # The process group still works after every refusal.
    x = values(100, torch.float32)
    got = x.clone()
    dist.all_reduce(got)
    check("all_reduce after the errors", got, gloo_all_reduce(x, "SUM"))


TESTS = [test_all_reduce, test_all_reduce_coalesced, test_reduce, test_reduce_scatter,
         test_broadcast, test_all_gather, test_all_gather_exchange, test_staging, test_gather_scatter, test_all_to_all, test_send_recv,
         test_barrier, test_completion, test_unwatched, test_recv_then_agree, test_async_agreements, test_objects, test_new_group,
         test_more_dtypes, test_uneven_all_to_all, test_monitored_barrier, test_errors]

if __name__ == "__main__":
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

#!/usr/bin/env python3
"""The binding's per-call cost for small tensors, layer by layer, on collx and on gloo.

    PYTHONPATH=build/torch mpirun -np 1 build-venv/bin/python torch/benchmarks/overhead.py
    PYTHONPATH=build/torch mpirun -np 2 build-venv/bin/python torch/benchmarks/overhead.py

Per backend and operation (float32, --bytes per call), the median of --rounds rounds of
--iterations back-to-back calls (a round's time the slowest rank's mean per call), through:
  dist        torch.distributed's function (what users and bench.py call)
  pg          the process group's own method and work.wait() (no distributed_c10d checks)
  pg_async    the same launch, then work.is_completed() polled until true, then wait()
  launch      the launch alone, every work waited on at the end of the round (np=1 only:
              elsewhere the ranks would not meet)
At np=1 no message moves: collx's time is the binding's own (checks, staging, the Work, the
completion thread) beside torch's Python and pybind11 layers, which gloo's time has too.
"""
import argparse
import time

import torch

import collx_torch  # noqa: F401  (registers the "collx" backend)
import torch.distributed as dist


def per_call(fn, iterations, rounds, group):
    for _ in range(20):
        fn()
    times = torch.empty(rounds, dtype=torch.float64)
    for r in range(rounds):
        dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        times[r] = (time.perf_counter() - start) / iterations
    dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
    return times.median().item() * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    dist.init_process_group("collx")
    torch.set_num_threads(1)
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"collx": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    pgs = {"collx": dist.distributed_c10d._get_default_group(), "gloo": groups["gloo"]}
    t = torch.ones(max(1, args.bytes // 4))

    def python_loop():
        pass

    rows = []
    base = per_call(python_loop, args.iterations, args.rounds, groups["gloo"])
    for name, group in groups.items():
        pg = pgs[name]
        bopts = dist.BroadcastOptions()
        bopts.rootRank = 0
        aopts = dist.AllreduceOptions()

        def pg_async():
            work = pg.broadcast([t], bopts)
            while not work.is_completed():
                pass
            work.wait()

        calls = {
            "broadcast dist": lambda: dist.broadcast(t, 0, group=group),
            "broadcast pg": lambda: pg.broadcast([t], bopts).wait(),
            "broadcast pg_async": pg_async,
            "all_reduce dist": lambda: dist.all_reduce(t.zero_(), group=group),
            "all_reduce pg": lambda: pg.allreduce([t.zero_()], aopts).wait(),
        }
        if size == 1:
            works = []

            def launch_only():
                works.append(pg.broadcast([t], bopts))
                if len(works) == 100:
                    for w in works:
                        w.wait()
                    works.clear()

            calls["broadcast launch"] = launch_only
        for what, fn in calls.items():
            rows.append((name, what, per_call(fn, args.iterations, args.rounds, groups["gloo"])))
    if rank == 0:
        print(f"np={size}, {args.bytes} B float32, median of {args.rounds} rounds of "
              f"{args.iterations} calls; an empty Python call: {base:.2f} us")
        print(f"{'backend':>7} {'call':>20} {'us per call':>12}")
        for name, what, us in rows:
            print(f"{name:>7} {what:>20} {us:12.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

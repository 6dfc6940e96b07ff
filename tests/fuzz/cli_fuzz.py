#!/usr/bin/python3
"""collx-bench's and collx-train's numeric flags fed hostile values, as a user runs them.

Each case is one mpiexec command line: a tiny valid run of the app with one numeric flag set to a
hostile value (negative, zero, huge, not a number, with spaces, hexadecimal, NaN, infinite) or a
combination that overflows (a huge count times the ranks, the largest widths together). Every
case must
  - end within the time limit (no hang),
  - not die of a signal (exit status < 128, no "Segmentation fault", "Aborted", "terminate
    called", no sanitizer report, no MPI_Abort: an uncaught exception is not a clear error),
  - and either succeed, or fail with a short error that names the flag (any of its spellings).

The cases run are a sample drawn from a seed (every flag at least once per seed, the rest at
random), under a time budget; --all runs every case. The seed is printed first and on failure:
  COLLX_FUZZ_SEED=<seed> ctest -L fuzz          (or: cli_fuzz.py ... --seed <seed>)
COLLX_FUZZ_SEED=random draws a new one; COLLX_FUZZ_CASES=N asks for another sample size.

Usage: cli_fuzz.py --mpiexec MPIEXEC [--mpiexec-flag FLAG]... --bench COLLX_BENCH
                   --train COLLX_TRAIN --work DIR [--seed N] [--cases N] [--all]
                   [--only bench|train] [--jobs N] [--limit SECONDS_PER_CASE]
                   [--budget SECONDS]
"""
import argparse
import concurrent.futures
import os
import random
import re
import signal
import subprocess
import sys
import time

# ---- hostile values ----
HUGE = ["9223372036854775808",  # 2^63: one past int64
        "18446744073709551616",  # 2^64: one past uint64
        "4294967296",  # 2^32: one past uint32
        "99999999999999999999999999", "1e308", "-1e308"]
NEGATIVE = ["-1", "-5", "-9223372036854775808", "-0"]
SMALL = ["0", "1", "1e-300"]
NOT_A_NUMBER = ["", "abc", "1e", "nan", "-nan", "inf", "-inf", "0x10", "  5", "5 ", "3.5",
                "5abc", "1,5", "+", "--", "010"]
VALUES = HUGE + NEGATIVE + SMALL + NOT_A_NUMBER
SIZE_VALUES = VALUES + ["8X", "1K", "16EiB", "17179869184G", "-1K", "1KK", "0K"]

MAX_ERROR_LINE = 400  # characters
CRASH = re.compile(r"Segmentation fault|signal \d+|SIG(SEGV|ABRT|BUS|FPE|ILL)|Aborted|"
                   r"core dumped|terminate called|std::bad_alloc|what\(\):|malloc\(\)|corrupted|"
                   r"double free|AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|"
                   r"ThreadSanitizer|runtime error:|MPI_ABORT|stack smashing")

# ---- the apps' tiny runs and their numeric flags ----
# bench: (flag spellings, base arguments the flag needs, values)
BENCH_BASE = ["allreduce", "-b", "8", "-e", "64", "-f", "8", "-n", "1", "-w", "0", "--rounds",
              "1", "-c", "1", "-a", "auto"]
BENCH_FLAGS = [
    (["-b", "--minbytes"], [], SIZE_VALUES),
    (["-e", "--maxbytes"], [], SIZE_VALUES),
    (["-f", "--stepfactor"], [], VALUES),
    (["-n", "--iters"], [], VALUES),
    (["-w", "--warmup_iters"], [], VALUES),
    (["--rounds"], [], VALUES),
    (["-c", "--check"], [], VALUES),
    (["-r", "--root"], ["@broadcast"], VALUES),
    (["--segment", "--chunk"], [], SIZE_VALUES),
    (["--depth"], [], VALUES),
    (["--llc"], ["--cold"], SIZE_VALUES),
    (["--overlap"], [], VALUES),
    (["--offset"], [], VALUES),
]
TRAIN_BASE = ["--no-progress", "--synthetic", "--synthetic-train", "200", "--synthetic-test",
              "50", "--epochs", "1", "--hidden", "8", "--batch", "50", "--stop-after", "2"]
TRAIN_FLAGS = [
    (["--epochs"], [], VALUES),
    (["--batch"], [], VALUES),
    (["--accum"], [], VALUES),
    (["--lr"], [], VALUES),
    (["--lr-batch"], [], VALUES),
    (["--momentum"], ["--optimizer", "sgd"], VALUES),
    (["--beta1"], [], VALUES),
    (["--beta2"], [], VALUES),
    (["--eps"], [], VALUES),
    (["--weight-decay"], [], VALUES),
    (["--warmup-epochs"], [], VALUES),
    (["--seed"], [], VALUES),
    (["--bucket-mb"], [], VALUES),
    (["--first-bucket-mb"], [], VALUES),
    (["--checkpoint-every"], ["--checkpoint", "@ckpt"], VALUES),
    (["--stop-after"], [], VALUES),
    (["--eval-batch"], [], VALUES),
    (["--synthetic-train"], [], VALUES),
    (["--synthetic-test"], [], VALUES),
    (["--train-limit"], [], VALUES),
    (["--hidden"], [], VALUES + ["8,-1", "8,,8", "65536,65536,65536", "8,"]),
    (["--replicas"], ["--parallel", "tensor"], VALUES),
    (["--micro-batches"], ["--parallel", "pipeline"], VALUES),
    (["--powersgd-rank"], ["--compress", "powersgd"], VALUES),
    (["--powersgd-warmup"], ["--compress", "powersgd"], VALUES),
]
# Values that overflow only together (a count times the ranks, widths times widths), each
# (app, np, the flags that must be named in an error (any one), arguments). "@..." is filled in.
COMBINATIONS = [
    ("bench", 2, ["-e", "--maxbytes", "-b", "--minbytes"],
     ["alltoall", "-b", "4611686018427387904", "-e", "4611686018427387904", "-d", "float64"]),
    ("bench", 2, ["-e", "--maxbytes", "-b", "--minbytes"],
     ["allgather", "-b", "8", "-e", "16E", "-f", "1024"]),
    ("bench", 2, ["-e", "--maxbytes", "-b", "--minbytes"],
     ["gather", "-b", "64G", "-e", "64G", "-r", "1"]),
    ("bench", 1, ["-e", "--maxbytes", "-b", "--minbytes"],
     ["allreduce", "-b", "18446744073709551615", "-e", "18446744073709551615", "-f", "2"]),
    ("bench", 1, ["-e", "--maxbytes", "-f", "--stepfactor"],
     ["allreduce", "-b", "1", "-e", "9223372036854775807", "-f", "1024"]),
    ("bench", 1, ["--llc"], ["allreduce", "--cold", "--llc", "9223372036854775807", "-b", "8",
                             "-e", "8"]),
    ("bench", 1, ["--llc"], ["allreduce", "--cold", "--llc", "4G", "-b", "8", "-e", "8"]),
    ("bench", 1, ["--segment", "--chunk", "--depth"],
     ["allreduce", "--segment", "16G", "--depth", "64", "-b", "64", "-e", "64"]),
    ("bench", 2, ["-r", "--root"], ["reduce", "-r", "2"]),
    ("bench", 2, ["-r", "--root"], ["scatter", "-r", "-1"]),
    ("train", 1, ["--hidden"], ["--hidden", "65536,65536,65536"]),
    ("train", 2, ["--hidden"], ["--hidden", "65536,65536"]),
    ("train", 2, ["--eval-batch", "--hidden"], ["--hidden", "65536", "--eval-batch", "16777216"]),
    ("train", 2, ["--batch", "--synthetic-train"],
     ["--batch", "16777216", "--synthetic-train", "1048576", "--synthetic-test", "1"]),
    ("train", 2, ["--batch"], ["--batch", "1", "--accum", "1048576"]),
    ("train", 2, ["--micro-batches", "--batch"],
     ["--parallel", "pipeline", "--micro-batches", "4096", "--batch", "50"]),
    ("train", 2, ["--powersgd-rank", "--hidden"],
     ["--compress", "powersgd", "--powersgd-rank", "65536", "--hidden", "16"]),
    ("train", 2, ["--bucket-mb", "--first-bucket-mb"],
     ["--bucket-mb", "65536", "--first-bucket-mb", "1e-300"]),
    ("train", 2, ["--checkpoint-every", "--stop-after"],
     ["--checkpoint", "@ckpt", "--checkpoint-every", "9223372036854775807", "--stop-after",
      "9223372036854775807"]),
]


# Open MPI's mpiexec waits odls_base_sigkill_timeout (1 s) after a rank exits non-zero before it
# ends the job, about 2 s in all per refused case; the cases end the job at once (MPICH ignores
# the variable).
ENVIRONMENT = dict(os.environ)
ENVIRONMENT.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "0")


class Case:
    def __init__(self, app, np, names, args, label):
        self.app, self.np, self.names, self.args, self.label = app, np, names, args, label


VALUELESS = {"--cold", "--in-place", "--no-progress", "--synthetic", "--shard", "--no-overlap",
             "--verify-replicas"}


def merge(base, args, spellings=()):
    """`args` over `base`: an option of base given in args (or one of `spellings`) is dropped
    from base, with its value; a collective given first in args replaces base's."""
    given = {a for a in args if a.startswith("-") and len(a) > 1} | set(spellings)
    out = []
    i = 0
    while i < len(base):
        item = base[i]
        takes_value = item.startswith("-") and item not in VALUELESS
        if item in given:
            i += 2 if takes_value else 1
            continue
        out.append(item)
        i += 1
    if args and not args[0].startswith("-") and out and not out[0].startswith("-"):
        out = out[1:]  # the combination's own collective
    return (args[:1] + out + args[1:]) if args and not args[0].startswith("-") else out + args


def flag_case(app, np, spellings, needs, value, spelling):
    base = BENCH_BASE if app == "bench" else TRAIN_BASE
    needs = list(needs)
    lead = []
    if "@broadcast" in needs:
        needs.remove("@broadcast")
        lead = ["broadcast"]
    args = merge(base, lead + needs + [spelling, value], spellings)
    return Case(app, np, spellings, args, f"{app} np{np} {spelling} {value!r}")


def combination_case(app, np, names, args):
    base = BENCH_BASE if app == "bench" else TRAIN_BASE
    return Case(app, np, names, merge(base, list(args)), f"{app} np{np} {' '.join(args)}")


def single_flags():
    single = []
    for app, flags in (("bench", BENCH_FLAGS), ("train", TRAIN_FLAGS)):
        for spellings, needs, values in flags:
            for value in values:
                single.append((app, spellings, needs, value))
    return single


def draw(rng, cases_wanted, everything):
    """Every case (--all): each flag with each value at 1 rank, a few flags at 2 ranks, every
    combination. A sample: 5 combinations and 4 single flags at 2 ranks, every flag once with a
    drawn value, and the rest single flags at 1 rank, up to `cases_wanted`."""
    single = single_flags()
    if everything:
        chosen = [flag_case(app, 1, sp, needs, v, sp[0]) for app, sp, needs, v in single]
        chosen += [flag_case(app, 2, sp, needs, v, sp[-1]) for app, sp, needs, v in single
                   if sp[0] in ("-e", "-r", "--batch", "--hidden", "--replicas")]
        chosen += [combination_case(*c) for c in COMBINATIONS]
        return chosen
    # The 2-rank cases first (the longest), then every flag, then the rest: under a time budget
    # the last ones drawn are the ones left out.
    chosen = [combination_case(*c) for c in rng.sample(COMBINATIONS, min(5, len(COMBINATIONS)))]
    for app, spellings, needs, value in rng.sample(single, 4):
        chosen.append(flag_case(app, 2, spellings, needs, value, rng.choice(spellings)))
    for app, flags in (("bench", BENCH_FLAGS), ("train", TRAIN_FLAGS)):
        for spellings, needs, values in flags:
            chosen.append(flag_case(app, 1, spellings, needs, rng.choice(values),
                                    rng.choice(spellings)))
    rest = max(0, cases_wanted - len(chosen))
    for app, spellings, needs, value in rng.sample(single, min(rest, len(single))):
        chosen.append(flag_case(app, 1, spellings, needs, value, rng.choice(spellings)))
    return chosen


def run_case(case, opts, index):
    program = opts.bench if case.app == "bench" else opts.train
    args = [os.path.join(opts.work, f"case{index}.ckpt") if a == "@ckpt" else a
            for a in case.args]
    command = [opts.mpiexec, "-n", str(case.np)] + opts.mpiexec_flag + [program] + args
    # Cases run two at a time: each its own base for Open MPI's session directory, which two
    # mpiexecs started together race on (tests/CMakeLists.txt, collx_mpi_session_per_test).
    environment = dict(ENVIRONMENT)
    environment["OMPI_MCA_orte_tmpdir_base"] = os.path.join(opts.work, f"case{index}.sessions")
    start = time.monotonic()
    # A session of its own: on a hang the launcher and its ranks all end together.
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, env=environment)
    try:
        out, _ = proc.communicate(timeout=opts.limit)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = proc.communicate()
        status = None
    return case, command, status, out.decode("utf-8", "replace"), time.monotonic() - start


def judge(case, status, output):
    """"" when the case ended as it must, else why not."""
    if status is None:
        return "did not end within the time limit (a hang)"
    if status < 0 or status >= 128:
        return f"exit status {status} (a signal)"
    crash = CRASH.search(output)
    if crash:
        line = next((l for l in output.splitlines() if crash.group(0) in l), crash.group(0))
        return f"a crash report: {line.strip()}"
    if status == 0:
        return ""
    # An error: a line of its own (not a dump of the help, not a paragraph) names the flag (any
    # spelling) as a word.
    lines = [l for l in output.splitlines() if l.strip()]
    for name in case.names:
        pattern = re.compile(r"(^|[\s\"'(])" + re.escape(name) + r"($|[\s:=,\"')])")
        if any(pattern.search(l) and len(l) <= MAX_ERROR_LINE for l in lines):
            return ""
    return "failed (status %d) without a one-line error naming %s" % (status,
                                                                      " or ".join(case.names))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--mpiexec-flag", action="append", default=[])
    parser.add_argument("--bench", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seed", default=os.environ.get("COLLX_FUZZ_SEED", "20261123"))
    parser.add_argument("--cases", type=int, default=int(os.environ.get("COLLX_FUZZ_CASES", "60")))
    parser.add_argument("--all", action="store_true", help="every case, not a sample")
    parser.add_argument("--only", choices=["bench", "train"], help="one app's cases only")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=float, default=30, help="seconds per case")
    parser.add_argument("--budget", type=float, default=0,
                        help="stop starting cases after this many seconds (0: no budget)")
    opts = parser.parse_args()
    seed = random.SystemRandom().randrange(1, 2**31) if opts.seed == "random" else int(opts.seed)
    rng = random.Random(seed)
    os.makedirs(opts.work, exist_ok=True)
    cases = draw(rng, opts.cases, opts.all)
    if opts.only:
        cases = [c for c in cases if c.app == opts.only]
    print(f"cli_fuzz: seed {seed}: {len(cases)} cases, {opts.jobs} at a time", flush=True)
    failures = []
    ran = 0
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        futures = []
        for i, case in enumerate(cases):
            futures.append(pool.submit(
                lambda c=case, i=i: None if opts.budget and time.monotonic() - start > opts.budget
                else run_case(c, opts, i)))
        outcomes = {"ok": 0, "refused": 0}
        for future in futures:
            result = future.result()
            if result is None:
                continue
            ran += 1
            case, command, status, output, seconds = result
            why = judge(case, status, output)
            if why:
                failures.append((case, command, status, output, why))
                print(f"cli_fuzz: FAIL  {case.label}: {why} ({seconds:.1f} s)", flush=True)
            else:
                outcomes["ok" if status == 0 else "refused"] += 1
                print(f"cli_fuzz: ok    {case.label}: "
                      f"{'ran' if status == 0 else 'refused (status %d)' % status} "
                      f"({seconds:.1f} s)", flush=True)
    elapsed = time.monotonic() - start
    print(f"cli_fuzz: {ran} of {len(cases)} cases in {elapsed:.1f} s: {outcomes['ok']} ran, "
          f"{outcomes['refused']} refused with an error naming the flag, {len(failures)} failed")
    for case, command, status, output, why in failures:
        print(f"\n---- {case.label}: {why}\n  command: "
              + " ".join(repr(a) if (not a or " " in a) else a for a in command))
        tail = output.splitlines()[-12:]
        print("\n".join("  | " + l for l in tail))
    if failures:
        print(f"\ncli_fuzz: FAILED (seed {seed}): {len(failures)} cases; repeat with "
              f"COLLX_FUZZ_SEED={seed} (and COLLX_FUZZ_CASES={opts.cases})")
        return 1
    print(f"cli_fuzz: OK (seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

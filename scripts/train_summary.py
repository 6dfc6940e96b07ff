#!/usr/bin/env python3
"""Medians over the runs of scripts/train-figures.sh: reads DIR/{default_np2,scaling_np1,
scaling_np2,nooverlap_np2}_rN.json, DIR/acc_<strategy>_np2_rN.json,
DIR/strat_<strategy>_np<N>_rN.json and
DIR/<bubble set>_<schedule>-m<M>_rN.json (collx-train --log-json files; the sets in BUBBLE_SETS) and prints the figures of
docs/TRAINING.md as Markdown."""
import glob
import json
import re
import statistics
import sys


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [l for l in lines if not l.get("final")], next(l for l in lines if l.get("final"))


def runs(directory, name):
    return [load(p) for p in sorted(glob.glob(f"{directory}/{name}_r*.json"))]


def per_run(epochs):
    """One run's figures: throughput over all its epochs, per-epoch means of the time split."""
    samples = sum(e["samples_per_s"] * e["train_s"] for e in epochs)
    train = sum(e["train_s"] for e in epochs)
    mean = lambda key: statistics.fmean(e[key] for e in epochs)
    return {
        "samples_per_s": samples / train,
        "exposed": mean("comm_exposed_fraction"),
        "train_s": mean("train_s"),
        "compute_s": mean("compute_s"),
        "comm_s": mean("comm_s"),
        "forward_s": mean("forward_s"),
        "backward_s": mean("backward_s"),
        "update_s": mean("update_s"),
        "eval_s": mean("eval_s"),
    }


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "train-figures"
    default = runs(directory, "default_np2")
    if default:
        acc = [final["test_accuracy"] for _, final in default]
        wall = [final["wall_s"] for _, final in default]
        print(f"## default run, np=2 ({len(default)} runs)\n")
        print("| run | test accuracy | wall s |\n|---|---|---|")
        for i, (a, w) in enumerate(zip(acc, wall), 1):
            print(f"| {i} | {a:.4f} | {w:.1f} |")
        print(f"| median | {median(acc):.4f} | {median(wall):.1f} |\n")

    table = {}
    for name in ("scaling_np1", "scaling_np2", "nooverlap_np2"):
        rs = [per_run(epochs) for epochs, _ in runs(directory, name)]
        if rs:
            table[name] = {k: median([r[k] for r in rs]) for k in rs[0]} | {"runs": len(rs)}
            table[name]["all_sps"] = [r["samples_per_s"] for r in rs]
    if "scaling_np1" in table and "scaling_np2" in table:
        # Paired by run: np=1 and np=2 of a run started within seconds of each other.
        pairs = list(zip(runs(directory, "scaling_np1"), runs(directory, "scaling_np2")))
        paired = [per_run(b[0])["samples_per_s"] / per_run(a[0])["samples_per_s"]
                  for a, b in pairs]
        one, two = table["scaling_np1"], table["scaling_np2"]
        print(f"## throughput, same global batch ({one['runs']} runs each)\n")
        print("| ranks | samples/s (median) | runs |\n|---|---|---|")
        for label, t in (("1", one), ("2", two)):
            print(f"| {label} | {t['samples_per_s']:.0f} | "
                  + ", ".join(f"{x:.0f}" for x in t["all_sps"]) + " |")
        print(f"\nspeed-up np=2 / np=1: {two['samples_per_s'] / one['samples_per_s']:.2f}x "
              "(ratio of the medians); per run: "
              + ", ".join(f"{x:.2f}x" for x in paired) + "\n")
    rows = [(n, table[n]) for n in ("scaling_np1", "scaling_np2", "nooverlap_np2") if n in table]
    if rows:
        print("## time per epoch (medians; train = step time of the slowest rank, the split "
              "is the ranks' mean)\n")
        print("| run | train s | compute s | forward | backward | update | exposed comm s "
              "| exposed share |\n|---|---|---|---|---|---|---|---|")
        names = {"scaling_np1": "np=1", "scaling_np2": "np=2 overlap",
                 "nooverlap_np2": "np=2 --no-overlap"}
        for n, t in rows:
            print(f"| {names[n]} | {t['train_s']:.3f} | {t['compute_s']:.3f} | "
                  f"{t['forward_s']:.3f} | {t['backward_s']:.3f} | {t['update_s']:.3f} | "
                  f"{t['comm_s']:.3f} | {100 * t['exposed']:.1f}% |")
    accuracy_table(directory)
    strategy_table(directory)
    bubble_table(directory)
    try:
        with open(f"{directory}/loadavg.txt") as f:
            print("\n## load average (1, 5, 15 min) when each command started\n")
            print("```\n" + f.read().rstrip() + "\n```")
    except FileNotFoundError:
        pass


def last_epochs(paths):
    """The last epoch's line of each run (the first epoch also pays for the first touches)."""
    return [load(p)[0][-1] for p in sorted(paths)]


def mib(value):
    return value / 2**20


def accuracy_table(directory):
    """acc_<strategy>_np2_rN.json: each strategy's default run at np=2. Accuracy only: the runs
    are deterministic, and their timings belong to the tables that take medians."""
    rows = []
    for name, shown in (("dp", "dp"), ("fsdp", "fsdp"), ("pipeline", "pipeline 1f1b m=4"),
                        ("tensor", "tensor"), ("bf16", "dp + bf16"), ("fp16", "dp + fp16"),
                        ("powersgd", "dp + powersgd r=8")):
        rs = runs(directory, f"acc_{name}_np2")
        if rs:
            _, final = rs[0]
            rows.append((shown, final["test_accuracy"], final["steps"], final["weights_checksum"]))
    if not rows:
        return
    print("## each strategy's default run, np=2 (deterministic, one run)\n")
    print("| strategy | test accuracy | >= 0.895 | steps | weights checksum |\n"
          "| --- | --- | --- | --- | --- |")
    for shown, acc, steps, checksum in rows:
        print(f"| {shown} | {acc:.4f} | {'yes' if acc >= 0.895 else 'NO'} | {steps} | {checksum} |")
    print()


def strategy_table(directory):
    groups = {}
    for path in glob.glob(f"{directory}/strat_*_r*.json"):
        m = re.search(r"strat_(.+)_np(\d+)_r\d+\.json$", path)
        if m:
            groups.setdefault((m.group(1), int(m.group(2))), []).append(path)
    if not groups:
        return
    order = ["dp", "fsdp", "tensor", "bf16", "fp16", "powersgd"]
    label = {"bf16": "dp + bf16", "fp16": "dp + fp16", "powersgd": "dp + powersgd r=8"}

    def key(item):
        name, np = item
        rank = order.index(name) if name in order else len(order)
        m = re.search(r"pipeline-(gpipe|1f1b)-m(\d+)", name)
        pipeline = (m.group(1) != "gpipe", int(m.group(2))) if m else (False, 0)
        return (rank, pipeline, np)

    print("## strategies (medians of the last epoch of each run; pipeline at np=4: 2 replicas "
          "x 2 stages)\n")
    print("| strategy | np | runs | samples/s | exposed comm | bytes/step per rank | "
          "model state per rank | all memory per rank | bubble (replayed; formula) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, np in sorted(groups, key=key):
        lines = last_epochs(groups[(name, np)])
        med = lambda k: median([l.get(k, float("nan")) for l in lines])
        shown = label.get(name, name.replace("pipeline-", "pipeline ").replace("-m", " m="))
        bubble = (f"{100 * med('bubble_fraction'):.1f}% ({100 * med('bubble_replayed_fraction'):.1f}%; "
                  f"{100 * med('bubble_formula_fraction'):.1f}%)"
                  if name.startswith("pipeline") and np > 1 else "")
        print(f"| {shown} | {np} | {len(lines)} | {med('samples_per_s'):.0f} | "
              f"{100 * med('comm_exposed_fraction'):.1f}% | "
              f"{med('comm_bytes_per_step') / 1e6:.3f} MB | "
              f"{mib(med('memory_model_state_max')):.2f} MiB | "
              f"{mib(med('memory_total_max')):.2f} MiB | {bubble} |")
    print()


# The bubble sets of scripts/train-figures.sh: file prefix -> (stages, what they ran).
BUBBLE_SETS = {
    "bubble": (2, "--hidden 16,512,512,512,512,512, input-first"),
    "bubblewhole": (2, "--hidden 16,512,512,512,512,512, --pipeline-backward whole"),
    "bubble256": (2, "--hidden 256,512, input-first"),
    "bubble256whole": (2, "--hidden 256,512, --pipeline-backward whole"),
    "bubble4": (4, "--hidden 16,512x9, input-first"),
    "bubble4whole": (4, "--hidden 16,512x9, --pipeline-backward whole"),
}


def bubble_table(directory):
    """<set>_<schedule>-m<M>_rN.json for the sets of BUBBLE_SETS."""
    groups = {}
    for path in glob.glob(f"{directory}/bubble*_r*.json"):
        m = re.search(r"/(bubble[a-z0-9]*)_(gpipe|1f1b)-m(\d+)_r\d+\.json$", path)
        if m and m.group(1) in BUBBLE_SETS:
            groups.setdefault((m.group(1), int(m.group(3)), m.group(2)), []).append(path)
    if not groups:
        return
    print("## pipeline bubble (medians of the last epoch of each run)\n")
    print("| S | model, backward | m | split | ideal (S-1)/(m+S-1) | schedule | formula for these stages "
          "| runs | measured bubble | of it transfer | waiting for a pass | replayed bubble "
          "| measured / ideal | waiting for a pass / ideal | measured / formula "
          "| not running | samples/s | all memory per rank |")
    print("| --- " * 18 + "|")
    order = list(BUBBLE_SETS)
    for (name, m, schedule) in sorted(groups, key=lambda k: (order.index(k[0]), k[1], k[2] != "gpipe")):
        stages, what = BUBBLE_SETS[name]
        lines = last_epochs(groups[(name, m, schedule)])
        med = lambda k: median([l.get(k, float("nan")) for l in lines])
        ideal = (stages - 1) / (m + stages - 1)
        formula = med("bubble_formula_fraction")
        splits = sorted({l.get("pipeline_split", "?") for l in lines})
        # The bubble without the messages' copies (collx-train's bubble_transfer_fraction),
        # run by run; files from before it was measured count no transfer.
        waiting = median([l.get("bubble_fraction", float("nan")) - l.get("bubble_transfer_fraction", 0)
                          for l in lines])
        print(f"| {stages} | {what} | {m} | {' / '.join(splits)} | {ideal:.3f} | {schedule} | {formula:.3f} | {len(lines)} | "
              f"{med('bubble_fraction'):.3f} | {med('bubble_transfer_fraction'):.3f} | {waiting:.3f} | "
              f"{med('bubble_replayed_fraction'):.3f} | "
              f"{med('bubble_fraction') / ideal:.2f} | {waiting / ideal:.2f} | "
              f"{med('bubble_fraction') / formula:.2f} | "
              f"{100 * med('not_running_fraction'):.1f}% | "
              f"{med('samples_per_s'):.0f} | {mib(med('memory_total_max')):.2f} MiB |")
    print()


if __name__ == "__main__":
    main()

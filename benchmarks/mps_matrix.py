"""Naive time-slicing vs MPS vs MIG-shaped MPS partitions on one GPU, and an MPS memory limit that works.

The matrix: ResNet-18 and ResNet-50 (synthetic ImageNet-sized images, labelled synthetic; bf16 autocast;
batch 64 and 128) at 1, 2, 4 and 7 copies under
  naive          all copies time-sliced on the GPU
  mps            all copies as clients of one private MPS daemon, no limits
  mps-7x1g       MPS partitions shaped like MIG 7 x 1g (each job 1/7 of the SMs, 1/8 of the memory)
  mps-3g2g1g1g   MPS partitions shaped like MIG 3g+2g+1g+1g (copies beyond 4 have no partition: not run)
each `--repeats` times. MPS partitions are NOT MIG: no isolation of caches, memory bandwidth or faults.

Then the memory-limit demonstration: three ResNet-50 copies under MPS, the first limited below what it needs; it must
fail with out_of_memory while the other two complete. Finally no MPS process may be left (`pgrep -a nvidia-cuda-mps`).

Writes under --out: runs/ (every run, self-describing), matrix.csv and matrix.md (one row per model, batch, mode,
copies: aggregate images/s mean and spread over repeats, per-job step time, peak memory), oom_demo.csv/.md.
Every cell is measured once before any is repeated. Cells already measured under --out are not run again, so a matrix
that does not fit one budget is finished by running the same command again (the full default matrix is 180 runs, about
25 minutes on an H100). `--budget-s` stops starting new runs when the next group would not fit.

    python benchmarks/mps_matrix.py --out /tmp/mps-matrix                        # on the GPU machine
    python benchmarks/mps_matrix.py --out /tmp/smoke --smoke                       # logic check on a CPU (naive only)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.spec import ModeSpec

MODES = {
    "naive": "naive",
    "mps": {"name": "mps"},
    "mps-7x1g": {"name": "mps", "partitions": ["1g"] * 7},
    "mps-3g2g1g1g": {"name": "mps", "partitions": ["3g", "2g", "1g", "1g"]},
}
GUESS_RUN_S = 9.0  # wall time of one run before any was measured: worker start-up, warm-up, window, teardown


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    started = time.monotonic()
    deadline = started + args.budget_s
    seconds_per_run: list[float] = []
    skipped = []
    oom_ok = args.skip_oom_demo or oom_demo(args, out)
    for repeat in range(args.repeats):  # every cell once before any is repeated: a budget cut keeps a whole table
        for model in args.models:
            for batch in args.batch_sizes:
                for modes, copies in groups(args):
                    name = f"{model}-bs{batch}-{'+'.join(modes)}-r{repeat}"
                    expected = len(modes) * len(copies)
                    if measured(out / "runs" / name, expected):
                        continue
                    guess = expected * (sum(seconds_per_run) / len(seconds_per_run) if seconds_per_run else GUESS_RUN_S)
                    if time.monotonic() + guess > deadline:
                        skipped.append(f"{name} (about {guess:.0f} s)")
                        continue
                    set_aside(out, name)
                    t0 = time.monotonic()
                    colloc_kit.run([job(args, model, batch)], mode=[mode_spec(args, m) for m in modes], copies=copies,
                                   repeats=1, out=out / "runs", name=name, progress=not args.quiet,
                                   time_limit_s=None if args.smoke else args.seconds + 120)
                    seconds_per_run.append((time.monotonic() - t0) / expected)
    table = matrix_table(out)
    write_table(table, out / "matrix")
    print(table.to_string(index=False))
    print(f"\nwall time {time.monotonic() - started:.0f} s; tables in {out}/matrix.csv and matrix.md")
    if skipped:
        print("NOT RUN (budget; run the same command again to continue): " + ", ".join(skipped))
    assert_no_mps_process_left()
    return 0 if oom_ok else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    csv = lambda kind: lambda text: [kind(x) for x in text.split(",") if x]  # noqa: E731
    p.add_argument("--out", required=True, help="folder for runs and tables (cells already there are kept)")
    p.add_argument("--models", type=csv(str), default=["resnet18", "resnet50"])
    p.add_argument("--batch-sizes", type=csv(int), default=[64, 128])
    p.add_argument("--copies", type=csv(int), default=[1, 2, 4, 7])
    p.add_argument("--modes", type=csv(str), default=list(MODES), help=f"any of {', '.join(MODES)}")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5.0, help="training seconds per job, warm-up included")
    p.add_argument("--warmup-steps", type=int, default=8)
    p.add_argument("--budget-s", type=float, default=460.0, help="start no group of runs that would end later")
    p.add_argument("--skip-oom-demo", action="store_true")
    p.add_argument("--smoke", action="store_true",
                   help="check the script on a CPU: smallcnn, every mode replaced by naive, no MPS")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown:
        p.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if args.smoke:
        args.models, args.batch_sizes, args.skip_oom_demo = ["smallcnn"], args.batch_sizes[:1], True
    return args


def groups(args: argparse.Namespace) -> list[tuple[list[str], list[int]]]:
    """Calls to make: modes that run every copy count share one call (their runs interleave); a layout with fewer
    slots than copies runs alone on the counts it can place. In a smoke run every mode runs alone (all are naive)."""
    runnable = {m: [c for c in args.copies if slots(m) is None or c <= slots(m)] for m in args.modes}
    full = [] if args.smoke else [m for m, copies in runnable.items() if copies == args.copies]
    return ([(full, args.copies)] if full else []) + [([m], c) for m, c in runnable.items() if c and m not in full]


def slots(mode: str) -> int | None:
    spec = MODES[mode]
    return len(spec["partitions"]) if isinstance(spec, dict) and "partitions" in spec else None


def job(args: argparse.Namespace, model: str, batch: int) -> dict:
    if args.smoke:
        return {"model": "smallcnn", "device": "cpu", "batch_size": 16, "image_size": 32, "steps": 14,
                "warmup_steps": 4, "workers": 0, "interval_s": 0.2}
    return {"model": model, "dataset": "synthetic", "batch_size": batch, "amp": "bf16", "channels_last": True,
            "seconds": args.seconds, "warmup_steps": args.warmup_steps, "interval_s": 0.5}


def mode_spec(args: argparse.Namespace, mode: str) -> ModeSpec:
    """The mode to run; in a CPU smoke run, naive under the mode's name (its label keeps the run apart)."""
    if args.smoke:
        return ModeSpec("naive")
    return ModeSpec.parse(MODES[mode])


def measured(folder: Path, expected: int) -> bool:
    """Whether a group's runs are all on disk and finished (complete, or with failed jobs)."""
    if not folder.is_dir():
        return False
    runs = colloc_kit.load(folder).runs
    return len(runs) == expected and runs["status"].isin(["complete", "failed_jobs"]).all()


def set_aside(out: Path, name: str) -> None:
    """A group measured only in part (an interrupted command) is moved out of the table, not mixed into it."""
    folder = out / "runs" / name
    if folder.exists():
        target = out / "set-aside" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(target))


def matrix_table(out: Path) -> pd.DataFrame:
    """One row per (model, batch, mode, copies): throughput over repeats, per-job step time, memory, failures."""
    results = colloc_kit.load(out / "runs")
    if results.runs.empty:
        return pd.DataFrame()
    runs, jobs = results.runs.copy(), results.jobs.copy()
    for frame in (runs, jobs):
        parts = frame["experiment"].str.extract(r"^(?P<model>.+)-bs(?P<batch_size>\d+)-(?P<group>.+)-r(?P<rep>\d+)$")
        frame["model_"], frame["repeat_"] = parts["model"], parts["rep"].astype(int)
        frame["batch_size_"] = parts["batch_size"].astype(int)
        frame["mode_key"] = [mode_key(label, group) for label, group in zip(frame["mode_label"], parts["group"])]
    keys = ["model_", "batch_size_", "mode_key", "copies"]
    per_run = jobs.groupby(keys + ["repeat_"]).agg(
        step_time_ms=("step_time_s", lambda s: 1000 * s.mean()), epoch_time_s=("epoch_time_s", "mean"),
        peak_memory_mb=("peak_memory_mb", "max"), failed_jobs=("status", lambda s: int((s != "complete").sum())),
    ).reset_index()
    per_run = per_run.merge(runs[keys + ["repeat_", "aggregate_images_per_s"]], on=keys + ["repeat_"])
    table = per_run.groupby(keys).agg(
        repeats=("repeat_", "nunique"), aggregate_images_per_s=("aggregate_images_per_s", "mean"),
        spread_pct=("aggregate_images_per_s", lambda s: 100 * (s.max() - s.min()) / s.mean() if s.mean() else None),
        step_time_ms=("step_time_ms", "mean"), epoch_time_s=("epoch_time_s", "mean"),
        peak_memory_mb=("peak_memory_mb", "max"), failed_jobs=("failed_jobs", "sum"),
    ).reset_index()
    base = table[(table.mode_key == "naive") & (table.copies == 1)].set_index(["model_", "batch_size_"])
    table["vs_naive_x1"] = [row.aggregate_images_per_s / base.aggregate_images_per_s.get((row.model_, row.batch_size_))
                            if (row.model_, row.batch_size_) in base.index else None for row in table.itertuples()]
    order = {m: i for i, m in enumerate(MODES)}
    table = table.sort_values(["model_", "batch_size_", "mode_key", "copies"],
                              key=lambda c: c.map(order) if c.name == "mode_key" else c)
    return table.rename(columns={"model_": "model", "batch_size_": "batch_size", "mode_key": "mode"}).round(2)


def mode_key(label: str, group: str) -> str:
    """The matrix's name of a run's mode: its group's, where the group has one mode, else found by its label."""
    keys = group.split("+")
    return keys[0] if len(keys) == 1 else {ModeSpec.parse(MODES[k]).label: k for k in keys}[label]


def oom_demo(args: argparse.Namespace, out: Path) -> bool:
    """Three ResNet-50 copies under MPS; the first limited to 2 GiB (it needs more), the others to 16 GiB.
    Passes when the first fails out_of_memory and the others complete. Measured once per --out."""
    stored = out / "oom_demo.csv"
    if not stored.exists():
        spec = {"model": "resnet50", "batch_size": 128, "amp": "bf16", "channels_last": True,
                "seconds": args.seconds, "warmup_steps": args.warmup_steps, "interval_s": 0.5}
        results = colloc_kit.run([spec], mode={"name": "mps", "memory_limit_mb": [2048, 16384, 16384]}, copies=3,
                                 out=out / "runs-oom-demo", name="oom-demo", progress=not args.quiet,
                                 time_limit_s=args.seconds + 120)
        cols = ["job", "slot_memory_limit_mb", "status", "error_kind", "images_per_s", "peak_memory_mb", "mode_problem"]
        write_table(results.jobs[[c for c in cols if c in results.jobs]], out / "oom_demo")
    table = pd.read_csv(stored)
    print(table.to_string(index=False))
    first, rest = table.iloc[0], table.iloc[1:]
    ok = first.status == "failed" and first.error_kind == "out_of_memory" and (rest.status == "complete").all()
    verdict = "PASSED" if ok else "FAILED: expected job 0 out_of_memory and the others complete"
    print(f"memory-limit demonstration: {verdict}")
    return bool(ok)


def write_table(table: pd.DataFrame, stem: Path) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(stem.with_suffix(".csv"), index=False)
    stem.with_suffix(".md").write_text(markdown(table))


def markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "(no runs)\n"
    cell = lambda v: "" if pd.isna(v) else f"{v:,.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, row)) + " |" for row in table.itertuples(index=False)]) + "\n"


def assert_no_mps_process_left() -> None:
    left = subprocess.run(["pgrep", "-a", "nvidia-cuda-mps"], capture_output=True, text=True).stdout.strip()
    print(f"pgrep -a nvidia-cuda-mps: {left or '(nothing)'}")
    if left:
        raise SystemExit(f"MPS PROCESSES LEFT RUNNING:\n{left}")


if __name__ == "__main__":
    sys.exit(main())

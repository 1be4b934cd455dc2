"""Sweep experiment specs over models and batch sizes on one GPU, and summarise every stored run in one table.

The H100 figures in the issues' closing notes come from here (see benchmarks/h100.sh for the exact stages):

    python benchmarks/collocation_matrix.py run single-job naive-matrix --models resnet18 --batch-sizes 64,128 \
        --repeats 3 --seconds 4 --out benchmarks/results/baseline
    python benchmarks/collocation_matrix.py summarize benchmarks/results/baseline

`run` writes every run directory under OUT/runs/ and then summarises; `summarize` reads whatever runs are stored
under a folder (runs from several device commands can be merged by copying them under one folder). It writes
OUT/summary.csv and OUT/summary.md: per (model, batch size, mode, copies), over repeats, the aggregate images/s
(mean, and spread = (max - min) / mean), per-job images/s, step and epoch time, peak GPU memory, failed jobs, and
the speed-up over the same model and batch size alone (exclusive x1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.spec import ExperimentSpec, read_yaml, with_changes

KEYS = ["model", "batch_size", "mode_label", "copies"]


def sweep(spec_names: list[str], models: list[str], batch_sizes: list[int], out: Path, repeats: int | None,
          seconds: float | None) -> None:
    """Run every spec for every (model, batch size); the runs land under out/runs/."""
    for name in spec_names:
        data = read_yaml(name)
        data["repeats"] = repeats or data.get("repeats", 1)
        groups = data["jobs"]
        for model in models:
            for batch_size in batch_sizes:
                changes = {"model": model, "batch_size": batch_size, **({"seconds": seconds} if seconds else {})}
                data["jobs"] = [with_changes(job, changes) for job in groups]
                colloc_kit.run_spec(ExperimentSpec.from_mapping(data), out=out / "runs", progress=False)


def summarize(folder: Path) -> pd.DataFrame:
    """One row per (model, batch size, mode, copies) over the repeats stored under `folder`."""
    results = colloc_kit.load(folder)
    jobs = results.jobs.merge(results.runs[["run_id", "aggregate_images_per_s"]], on="run_id")
    runs = jobs.groupby(KEYS + ["run_id"], as_index=False).agg(
        aggregate_images_per_s=("aggregate_images_per_s", "first"),
        failed=("status", lambda s: int((s != "complete").sum())))
    table = runs.groupby(KEYS).agg(
        repeats=("run_id", "count"), aggregate_images_per_s=("aggregate_images_per_s", "mean"),
        agg_min=("aggregate_images_per_s", "min"), agg_max=("aggregate_images_per_s", "max"),
        failed_jobs=("failed", "sum"))
    table = table.join(jobs.groupby(KEYS).agg(
        job_images_per_s=("images_per_s", "mean"), step_time_ms=("step_time_s", "mean"),
        epoch_time_s=("epoch_time_s", "mean"), peak_memory_mb=("peak_memory_mb", "max")))
    table["step_time_ms"] *= 1000
    table["spread_pct"] = 100 * (table.pop("agg_max") - table.pop("agg_min")) / table["aggregate_images_per_s"]
    table = table.reset_index()
    alone = table[(table.mode_label == "exclusive") & (table.copies == 1)].set_index(["model", "batch_size"])
    table["speedup_vs_alone"] = [row.aggregate_images_per_s / alone["aggregate_images_per_s"].get((row.model, row.batch_size), float("nan"))
                                 for row in table.itertuples()]
    return table.sort_values(KEYS)


def write(table: pd.DataFrame, out: Path) -> None:
    table.to_csv(out / "summary.csv", index=False)
    text = table.to_string(index=False, float_format=lambda v: f"{v:,.1f}")
    (out / "summary.md").write_text("```\n" + text + "\n```\n")
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the sweep, then summarise")
    run.add_argument("specs", nargs="+", help="bundled spec names or YAML paths")
    run.add_argument("--models", default="resnet18,resnet50")
    run.add_argument("--batch-sizes", default="64,128")
    run.add_argument("--repeats", type=int, help="override the specs' repeats")
    run.add_argument("--seconds", type=float, help="override the jobs' budget: seconds of training")
    run.add_argument("--out", type=Path, default=Path("benchmarks/results/matrix"))
    summary = sub.add_parser("summarize", help="summarise the runs stored under a folder")
    summary.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        sweep(args.specs, args.models.split(","), [int(b) for b in args.batch_sizes.split(",")], args.out,
              args.repeats, args.seconds)
    write(summarize(args.out), args.out)


if __name__ == "__main__":
    main()

"""Sweep bundled (or your own) experiment specs over models and batch sizes; write one summary table.

Used for the H100 figures in the issues' closing notes:

    python benchmarks/collocation_matrix.py single-job naive-matrix --models resnet18,resnet50 \
        --batch-sizes 64,128 --repeats 3 --seconds 4 --out benchmarks/results/baseline

Writes DIR/runs/ (every run directory), DIR/summary.csv and DIR/summary.md: per (model, batch size, mode, copies)
the aggregate images/s over repeats (mean, spread = (max - min) / mean), per-job images/s, step and epoch time,
peak memory, failures, and the speed-up over the single job alone (exclusive x1) of the same model and batch size.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.spec import ExperimentSpec, read_yaml

KEYS = ["model", "batch_size", "mode_label", "copies"]


def sweep(spec_names: list[str], models: list[str], batch_sizes: list[int], out: Path, repeats: int | None,
          seconds: float | None, device: str | None = None) -> pd.DataFrame:
    """Run every spec for every (model, batch size); return all jobs, tagged with their run's aggregate."""
    frames = []
    for name in spec_names:
        data = read_yaml(name)
        if repeats:
            data["repeats"] = repeats
        for model in models:
            for batch_size in batch_sizes:
                changes = {"model": model, "batch_size": batch_size, **({"seconds": seconds} if seconds else {}),
                           **({"device": device} if device else {})}
                data["jobs"] = [{k: v for k, v in {**job, **changes}.items()
                                 if not (seconds and k in ("steps", "epochs"))} for job in data["jobs"]]
                results = colloc_kit.run_spec(ExperimentSpec.from_mapping(data), out=out / "runs", progress=False)
                frames.append(results.jobs.merge(results.runs[["run_id", "aggregate_images_per_s", "throughput_window"]],
                                                 on="run_id"))
    return pd.concat(frames, ignore_index=True)


def summarize(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, batch size, mode, copies) over repeats."""
    runs = jobs.groupby(KEYS + ["run_id"], as_index=False).agg(
        aggregate_images_per_s=("aggregate_images_per_s", "first"), failed=("status", lambda s: int((s != "complete").sum())))
    table = runs.groupby(KEYS).agg(
        repeats=("run_id", "count"), aggregate_images_per_s=("aggregate_images_per_s", "mean"),
        agg_min=("aggregate_images_per_s", "min"), agg_max=("aggregate_images_per_s", "max"),
        failed_jobs=("failed", "sum"))
    per_job = jobs.groupby(KEYS).agg(job_images_per_s=("images_per_s", "mean"), step_time_ms=("step_time_s", "mean"),
                                     epoch_time_s=("epoch_time_s", "mean"), peak_memory_mb=("peak_memory_mb", "max"))
    table = table.join(per_job)
    table["step_time_ms"] *= 1000
    table["spread_pct"] = 100 * (table.pop("agg_max") - table.pop("agg_min")) / table["aggregate_images_per_s"]
    alone = table.xs(("exclusive", 1), level=("mode_label", "copies"))["aggregate_images_per_s"] \
        if ("exclusive" in table.index.get_level_values("mode_label")) else None
    if alone is not None:
        table["speedup_vs_alone"] = [row.aggregate_images_per_s / alone.get((m, b), float("nan"))
                                     for (m, b, _, _), row in table.iterrows()]
    return table.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("specs", nargs="+", help="bundled spec names or YAML paths")
    parser.add_argument("--models", default="resnet18,resnet50")
    parser.add_argument("--batch-sizes", default="64,128")
    parser.add_argument("--repeats", type=int, help="override the specs' repeats")
    parser.add_argument("--seconds", type=float, help="override the jobs' budget: seconds of training")
    parser.add_argument("--device", choices=("cuda", "cpu"), help="override the jobs' device")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/matrix"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = sweep(args.specs, args.models.split(","), [int(b) for b in args.batch_sizes.split(",")], args.out,
                 args.repeats, args.seconds, args.device)
    jobs.to_csv(args.out / "jobs.csv", index=False)
    table = summarize(jobs)
    table.to_csv(args.out / "summary.csv", index=False)
    text = table.to_markdown(index=False, floatfmt=",.1f") if _has_tabulate() else table.to_string(index=False)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()

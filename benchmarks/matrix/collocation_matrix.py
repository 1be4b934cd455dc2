"""Sweep experiment specs over models and batch sizes on one GPU, and summarise every stored run in one table.

The H100 figures in the issues' closing notes come from here (see benchmarks/archive/h100.sh for the exact stages):

    python benchmarks/matrix/collocation_matrix.py run single-job naive-matrix --models resnet18 --batch-sizes 64,128 \
        --repeats 3 --seconds 4 --out /tmp/baseline
    python benchmarks/matrix/collocation_matrix.py summarize benchmarks/results/h100/matrix

`run` writes every run directory under OUT/runs/ and then summarises; `summarize` reads whatever runs are stored
under a folder (runs from several device commands can be merged by copying them under one folder), or, where the
folder holds no runs/ but a runs.tgz (a committed set, benchmarks/results/h100/matrix/), in that archive. It writes
OUT/summary.csv and OUT/summary.md: per (model, batch size, mode, copies), over repeats, the aggregate images/s and
the normalized throughput with their 95 % CIs, epoch-time growth, bound_by and flags, as `analysis.summarize`
defines them (baselines from the lone runs of the same experiment).
"""

from __future__ import annotations

import argparse
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.analysis import summaries as analysis
from colloc_kit.spec import ExperimentSpec, with_changes
from colloc_kit.spec.yaml_files import read_yaml

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


def unpacked(folder: Path) -> Path:
    """`folder`, or where it holds no runs/ but a runs.tgz (members runs/...), that archive unpacked into a temporary
    folder."""
    archive = folder / "runs.tgz"
    if (folder / "runs").is_dir() or not archive.is_file():
        return folder
    target = Path(tempfile.mkdtemp(prefix="matrix-runs-"))
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def summarize(folder: Path) -> pd.DataFrame:
    """One row per (model, batch size, mode, copies) over the repeats stored under `folder`: the kit's own figures
    (analysis.summarize), so this table and the notebooks agree."""
    results = colloc_kit.load(unpacked(folder))
    table = analysis.summarize(results)
    first_job = results.jobs.groupby("run_id")[["model", "batch_size"]].first()
    runs = analysis.run_summary(results).join(first_job, on="run_id")
    keys = runs.groupby(["experiment", "mode_label", "copies", "jobs_label"])[["model", "batch_size"]].first()
    table = table.join(keys, on=["experiment", "mode_label", "copies", "jobs_label"])
    columns = KEYS + ["repeats", "aggregate_images_per_s_mean", "aggregate_images_per_s_ci",
                      "normalized_throughput_mean",
                      "normalized_throughput_ci", "epoch_time_growth_mean", "bound_by", "flags"]
    return table[columns].sort_values(KEYS)


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
    run.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/matrix"))
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

"""Is it the GPU or the host (issue 38's targets), in one command on one GPU: every gain split against three lone
baselines, each repeated until it meets its precision target (host-matched and GPU-only +-5 %, as configured +-10 %)
or `--max-repeats` runs.

Workloads (the seed recipe: timm's training transform at 224 px on the CPU, 4 loader workers, unpinned, batch 128;
the kit's ResNet-26 / ResNet-50, the study's architectures without timm; `--timm` takes timm's):

    ResNet-26 fp32 on stand-in CIFAR-10      naive x3 and MPS x3
    ResNet-50 fp32 on stand-in ImageNet 64   MPS x3
    ResNet-26 bf16 on stand-in CIFAR-10      MPS x7

each with `baselines: [configured, host-matched, gpu-only]`. The stand-in data (`colloc-kit data make`) is made under
`--data` where missing. Writes to `--out`: attribution.md and attribution.csv (study's gain, GPU's part, host's part,
each with its 95 % CI, GPU-only gain; the lone runs each baseline took and the precision it reached), and runs/.

    python3 benchmarks/attribution/attribution.py --out /tmp/attr --data /tmp/seed-data    # an H100: ~8 minutes
    python3 benchmarks/attribution/attribution.py --out /tmp/attr --data /tmp/d --tiny     # the CPU: smallcnn, ~2 min
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from colloc_kit.analysis import summaries
from colloc_kit.pipeline import run_spec
from colloc_kit.spec import ExperimentSpec
from colloc_kit.spec.baselines import BASELINES, SEED_PRECISION
from colloc_kit.views.tables import table
from colloc_kit.worker.standin import make

__all__ = ["WORKLOADS", "specs", "baseline_rows", "write", "main"]

WORKLOADS = [  # (name, model, dataset, amp, modes, copies)
    ("r26-fp32", "resnet26", "cifar10", "off", ["naive", "mps"], 3),
    ("r50-fp32", "resnet50", "imagenet64", "off", ["mps"], 3),
    ("r26-bf16", "resnet26", "cifar10", "bf16", ["mps"], 7),
]
COLUMNS = ["workload", "mode_label", "copies", "study_gain_mean", "study_gain_ci", "gpu_part_mean", "gpu_part_ci",
           "host_part_mean", "host_part_ci", "gpu_only_gain_mean", "gpu_only_gain_ci", "attribution_note"]


def specs(args: argparse.Namespace) -> list[ExperimentSpec]:
    """One experiment per workload (its own folder under runs/), the baselines asked for in one line each."""
    out = []
    for name, model, dataset, amp, modes, copies in WORKLOADS:
        job = {"model": f"timm.{model}" if args.timm else model, "dataset": "imagefolder",
               "data_root": str(Path(args.data) / dataset), "batch_size": 128, "amp": amp, "recipe": "seed",
               "seconds": args.seconds, "warmup_steps": args.warmup_steps}
        if args.tiny:  # the CPU: a small model, small images, no MPS, two copies
            job |= {"model": "smallcnn", "device": "cpu", "batch_size": 16, "image_size": 64, "workers": 1}
            modes, copies = ["naive"], 2
        out.append(ExperimentSpec.from_mapping({
            "name": name, "jobs": [job], "modes": modes, "copies": [copies], "repeats": 1, "placement": "unpinned",
            "monitor": not args.tiny, "baselines": list(BASELINES), "baseline_precision": dict(SEED_PRECISION),
            "baseline_max_repeats": args.max_repeats}))
    return out


def baseline_rows(results, spec: ExperimentSpec) -> list[dict]:
    """Each lone baseline of an experiment: which it is, its lone runs and the precision they reached."""
    jobs = summaries.with_baselines(results.jobs)
    base = summaries.baselines(jobs)
    kinds = dict(zip(results.runs["run_id"], results.runs["cell_id"].map(_kind)))
    alone = jobs[jobs["alone"].astype(bool)].assign(kind=lambda f: f["run_id"].map(kinds))
    rows = []
    for _, lone in base.iterrows():
        same = alone[(alone["workers"] == lone["workers"]) & (alone["dataset"] == lone["dataset"])]
        kind = same["kind"].iloc[0] if len(same) else "?"
        rel = lone["baseline_images_per_s_ci"] / lone["baseline_images_per_s"]
        rows.append({"workload": spec.name, "baseline": kind, "workers": lone["workers"],
                     "images_per_s": round(lone["baseline_images_per_s"], 1), "lone_runs": int(lone["baseline_jobs"]),
                     "precision_pct": round(100 * rel, 1), "target_pct": 100 * SEED_PRECISION[kind]})
    return rows


def _kind(cell_id: str) -> str:
    return next((k for k in ("host-matched", "gpu-only") if str(cell_id).startswith(k + "-")), "configured")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for attribution.md, attribution.csv and runs/")
    parser.add_argument("--data", required=True, help="the stand-in data's root (made where missing)")
    parser.add_argument("--images", type=int, default=20000, help="stand-in images per dataset")
    parser.add_argument("--seconds", type=float, default=5.0, help="each measured window")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--max-repeats", type=int, default=3, help="the most lone runs of one baseline")
    parser.add_argument("--timm", action="store_true", help="timm's ResNets (pip install timm) instead of the kit's")
    parser.add_argument("--tiny", action="store_true", help="the CPU: smallcnn, 64 px, two copies, naive")
    args = parser.parse_args(argv)
    out, started = Path(args.out), time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    for dataset in sorted({w[2] for w in WORKLOADS}):
        make(dataset, args.data, images=args.images, progress=False)
    gains, lone = [], []
    for spec in specs(args):  # the tables are written after each workload: a run cut short keeps what it measured
        results = run_spec(spec, out=out / "runs", progress=False)
        summary = summaries.summarize(results)
        shared = summary[summary["baseline"].isna() & (summary["copies"] > 1)].assign(workload=spec.name)
        gains.append(shared.reindex(columns=COLUMNS))
        lone += baseline_rows(results, spec)
        write(out, pd.concat(gains, ignore_index=True), pd.DataFrame(lone), argv, started)
    print((out / "attribution.md").read_text())
    return 0


def write(out: Path, gains: pd.DataFrame, lone: pd.DataFrame, argv: list[str] | None, started: float) -> None:
    """attribution.md (both tables, the command and its minutes), attribution.csv, attribution-baselines.csv."""
    gains.to_csv(out / "attribution.csv", index=False)
    lone.to_csv(out / "attribution-baselines.csv", index=False)
    command = " ".join(argv) if argv is not None else " ".join(sys.argv[1:])
    (out / "attribution.md").write_text(
        f"# Is it the GPU or the host?\n\n{(time.monotonic() - started) / 60:.1f} min; `python3 "
        f"benchmarks/attribution/attribution.py {command}`\n\n" + table(gains, COLUMNS).to_markdown()
        + "\n\n## The baselines: lone runs taken and precision reached (95 % CI half-width)\n\n"
        + table(lone).to_markdown() + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

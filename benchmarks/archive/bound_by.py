"""Why a job gains from collocation: `bound_by` and its inputs for four workloads, alone and with copies.

    python benchmarks/archive/bound_by.py --seconds 4 --out benchmarks/results/h100/bound-by

Workloads (issue 10): ResNet-26 at 32 px bf16 with synthetic data on the device; the same from a CIFAR-10-format
loader (2 loader workers; the images are random pixels written in CIFAR-10's own file format, a labelled stand-in:
nothing is downloaded here); ResNet-26 at 224 px fp32 (as the seed's artifact trains it); ResNet-152 at 224 px bf16.
Each runs alone (exclusive) and under MPS with 7 copies (3 for ResNet-152), in one experiment per workload. Prints
one line per run as it ends (aggregate images/s with its CI, normalized throughput, bound_by and its inputs) and
writes OUT/runs.csv and OUT/jobs.csv.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import colloc_kit
from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import combine

COLUMNS = ["experiment", "mode_label", "copies", "aggregate_images_per_s", "aggregate_images_per_s_ci",
           "normalized_throughput", "bound_by", "gpu_util_pct", "sm_util_pct", "dram_bw_util_pct", "flags"]


def workloads(data_root: Path) -> dict[str, tuple[dict, int]]:
    r26 = {"model": "resnet26", "batch_size": 128, "warmup_steps": 20}
    return {
        "r26-32px-device": ({**r26, "image_size": 32, "amp": "bf16", "channels_last": True}, 7),
        "r26-32px-cifar-loader": ({**r26, "dataset": "cifar10", "data_root": str(data_root), "amp": "bf16",
                                   "channels_last": True, "workers": 2}, 7),
        "r26-224px-fp32": ({**r26, "image_size": 224}, 7),
        "r152-224px-bf16": ({"model": "resnet152", "batch_size": 128, "amp": "bf16", "channels_last": True,
                             "warmup_steps": 20}, 3),
    }


def cifar_standin(root: Path) -> Path:
    """50,000 random 32x32 images in CIFAR-10's python format (5 training batches), written once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from fake_datasets import write_cifar10  # noqa: PLC0415 - after tests/ joins sys.path above

    if not (root / "cifar-10-batches-py").is_dir():
        write_cifar10(root, images_per_batch=10_000)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/bound-by"))
    args = parser.parse_args()
    chosen = workloads(cifar_standin(args.out / "cifar10-standin"))
    names = args.only.split(",") if args.only else list(chosen)
    parts = []
    for name in names:  # alone, then with copies, in one experiment (the copies' baseline)
        job, copies = chosen[name]
        job = {**job, "seconds": args.seconds}
        parts += [colloc_kit.run([job], mode="exclusive", copies=1, out=args.out / "runs", name=name, progress=False),
                  colloc_kit.run([job], mode="mps", copies=copies, out=args.out / "runs", name=name, progress=False)]
        runs = analysis.run_summary(combine(parts[-2:]))
        print(runs[COLUMNS].to_string(index=False, header=len(parts) == 2, float_format=lambda v: f"{v:,.2f}"),
              flush=True)
    results = combine(parts)
    analysis.run_summary(results).to_csv(args.out / "runs.csv", index=False)
    analysis.with_baselines(results.jobs).to_csv(args.out / "jobs.csv", index=False)


if __name__ == "__main__":
    main()

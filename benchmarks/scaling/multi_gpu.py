"""The same experiment on one GPU and on two: wall time, each cell's throughput side by side, no MPS daemon left.

Part of the seed's experiment 33 for ResNet-26 (224 px, fp32, batch 128, synthetic data): naive and MPS at 1 and 3
copies, 3 repeats interleaved (12 cells; about 5 minutes on one GPU).

    python3 benchmarks/scaling/multi_gpu.py run --gpus 0 --out DIR/one        # one GPU
    python3 benchmarks/scaling/multi_gpu.py run --gpus 0,1 --out DIR/two      # the same cells over two GPUs
    python3 benchmarks/scaling/multi_gpu.py compare DIR/one DIR/two            # markdown: wall times, per-cell figures
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import colloc_kit
from colloc_kit.spec import ExperimentSpec

SPEC = {"name": "r26-exp33-part", "modes": ["naive", "mps"], "copies": [1, 3], "repeats": 3,
        "jobs": [{"model": "resnet26", "batch_size": 128, "image_size": 224, "amp": "off", "seconds": 5,
                  "warmup_steps": 20}]}


def run(gpus: list[int], seconds: float, out: Path) -> None:
    spec = ExperimentSpec.from_mapping({**SPEC, "gpus": gpus, "jobs": [{**SPEC["jobs"][0], "seconds": seconds}]})
    started = time.monotonic()
    results = colloc_kit.run_spec(spec, out=out)
    wall_s = time.monotonic() - started
    left = subprocess.run(["pgrep", "-a", "nvidia-cuda-mps"], capture_output=True, text=True).stdout.strip()
    record = {"gpus": gpus, "wall_s": round(wall_s, 1), "cells_run": len(results.runs),
              "complete": int((results.runs["status"] == "complete").sum()), "mps_processes_left": left or None}
    (out / "wall.json").write_text(json.dumps(record, indent=2))
    print(json.dumps(record))


def compare(one: Path, two: Path) -> None:
    """Wall times, and for each (mode, copies) the repeats' aggregate images/s: mean and range on each side."""
    walls = [json.loads((p / "wall.json").read_text()) for p in (one, two)]
    print("| GPUs | cells | wall s |\n|---|---|---|")
    for wall in walls:
        print(f"| {','.join(map(str, wall['gpus']))} | {wall['complete']}/{wall['cells_run']} | {wall['wall_s']} |")
    frames = [colloc_kit.load(p).runs.groupby(["mode_label", "copies"])["aggregate_images_per_s"] for p in (one, two)]
    stats = [f.agg(["mean", "min", "max", "count"]) for f in frames]
    print("\n| mode | copies | 1 GPU mean [min, max] | 2 GPUs mean [min, max] | ranges overlap |\n"
          "|---|---|---|---|---|")
    for key in stats[0].index:
        a, b = stats[0].loc[key], stats[1].loc[key] if key in stats[1].index else None
        right = f"{b['mean']:,.0f} [{b['min']:,.0f}, {b['max']:,.0f}]" if b is not None else "missing"
        overlap = b is not None and a["min"] <= b["max"] and b["min"] <= a["max"]
        print(f"| {key[0]} | {key[1]} | {a['mean']:,.0f} [{a['min']:,.0f}, {a['max']:,.0f}] | {right} | "
              f"{'yes' if overlap else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("--gpus", required=True, type=lambda s: [int(x) for x in s.split(",")])
    go.add_argument("--seconds", type=float, default=5.0, help="measured seconds per job")
    go.add_argument("--out", type=Path, required=True)
    both = sub.add_parser("compare")
    both.add_argument("one", type=Path)
    both.add_argument("two", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.gpus, args.seconds, args.out)
    else:
        compare(args.one, args.two)


if __name__ == "__main__":
    main()

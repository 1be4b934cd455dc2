"""An MPS memory limit at work: three ResNet-50 jobs under one daemon, the first limited below what it needs.

    PYTHONPATH=$PWD python3 benchmarks/archive/mps_memory_limit.py --out benchmarks/results/h100/mps-memory-limit

Passes when the limited job fails with `out_of_memory` while its two neighbours complete, and no MPS process is
left afterwards. Writes OUT/jobs.csv and prints the verdict (exit 1 if it fails).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import colloc_kit

LIMITS_MB = [2048, 16384, 16384]  # ResNet-50 at batch 128 in bf16 peaks near 6 GB
COLUMNS = ["job", "slot_memory_limit_mb", "status", "error_kind", "images_per_s", "peak_memory_mb", "error"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/mps-memory-limit"))
    parser.add_argument("--seconds", type=float, default=6)
    args = parser.parse_args()
    job = {"model": "resnet50", "batch_size": 128, "amp": "bf16", "channels_last": True, "seconds": args.seconds}
    results = colloc_kit.run([job], mode={"name": "mps", "memory_limit_mb": LIMITS_MB}, copies=len(LIMITS_MB),
                             out=args.out / "runs", name="mps-memory-limit", progress=False)
    table = results.jobs[COLUMNS]
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "jobs.csv", index=False)
    print(table.to_string(index=False))
    left = subprocess.run(["pgrep", "-a", "nvidia-cuda-mps"], capture_output=True, text=True).stdout.strip()
    limited, neighbours = table.iloc[0], table.iloc[1:]
    passed = (limited.status == "failed" and limited.error_kind == "out_of_memory"
              and (neighbours.status == "complete").all() and not left)
    print(f"MPS processes left: {left or 'none'}")
    print("PASS" if passed else "FAIL: expected job 0 out_of_memory, the others complete, no MPS process left")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""Why does a lone host-bound job's throughput swing between repeats? Each hypothesis as one variant, interleaved.

    python benchmarks/lone_swing.py --repeats 4 --seconds 5 --out benchmarks/results/h100/lone_swing

The job: ResNet-26 at 32 px, bf16, batch 128, synthetic data made once on the device (no input pipeline), alone
(exclusive). Variants, one change each against `kit` (the kit's defaults): `no-monitor` (the parent's NVML sampling
off), `gc-off` (Python's garbage collector disabled in the worker, through a sitecustomize on PYTHONPATH),
`pinned` (the kit and its worker confined to 4 cores with sched_setaffinity), `expandable` (the CUDA caching
allocator with expandable segments), `standalone` (the worker run alone, events to a file: no launcher, no event
pipe). Every run records the host CPU's steal time and frequency and the GPU's SM clock (monitor samples). Writes
OUT/runs.csv (one row per run) and OUT/summary.csv (per variant: mean, CV, 95 % CI, repeats needed for +-3 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil

import colloc_kit
from colloc_kit import events, figures
from colloc_kit.spec import JobSpec

JOB = {"model": "resnet26", "image_size": 32, "amp": "bf16", "batch_size": 128, "channels_last": True,
       "warmup_steps": 30, "device": "cuda"}
VARIANTS = ("kit", "no-monitor", "gc-off", "pinned", "expandable", "standalone")


def host_counters() -> tuple[float, float]:
    cpu = psutil.cpu_times()
    return getattr(cpu, "steal", 0.0), (psutil.cpu_freq().current if psutil.cpu_freq() else float("nan"))


def run_variant(variant: str, seconds: float, out: Path, gc_dir: Path) -> dict:
    job = {**JOB, "seconds": seconds}
    env_before = dict(os.environ)
    affinity = os.sched_getaffinity(0)
    try:
        if variant == "gc-off":
            os.environ["PYTHONPATH"] = f"{gc_dir}:{os.environ.get('PYTHONPATH', '')}"
        if variant == "expandable":
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        if variant == "pinned":
            os.sched_setaffinity(0, sorted(affinity)[2:6])
        steal0, freq0 = host_counters()
        t0 = time.time()
        if variant == "standalone":
            rate, sm_clock = standalone(job, out)
        else:
            res = colloc_kit.run([job], mode="exclusive", copies=1, out=out, name=variant,
                                 monitor=variant != "no-monitor", progress=False)
            rate = float(res.jobs["images_per_s"].iloc[0])
            sm_clock = float(res.jobs["sm_clock_mhz_mean"].iloc[0]) if "sm_clock_mhz_mean" in res.jobs else None
        steal1, freq1 = host_counters()
        return {"variant": variant, "images_per_s": rate, "wall_s": time.time() - t0, "cpu_steal_s": steal1 - steal0,
                "cpu_freq_mhz": (freq0 + freq1) / 2, "sm_clock_mhz": sm_clock}
    finally:
        os.environ.clear()
        os.environ.update(env_before)
        os.sched_setaffinity(0, affinity)


def standalone(job: dict, out: Path) -> tuple[float, None]:
    out.mkdir(parents=True, exist_ok=True)
    log = out / f"standalone-{time.time():.0f}.events.jsonl"
    with open(log, "w") as stdout:
        subprocess.run([sys.executable, "-m", "colloc_kit.worker", *JobSpec(**job).to_argv()], stdout=stdout,
                       check=True)
    end = [e for e in map(events.parse, log.read_text().splitlines()) if e and e["type"] == events.END][-1]
    return end["images_per_s"], None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    gc_dir = Path(tempfile.mkdtemp())
    (gc_dir / "sitecustomize.py").write_text("import gc\ngc.disable()\n")
    rows = []
    for repeat in range(args.repeats):  # interleaved: every variant once per round, so drift hits all alike
        for variant in args.variants.split(","):
            rows.append({"repeat": repeat, **run_variant(variant, args.seconds, args.out / "runs", gc_dir)})
            print(json.dumps(rows[-1]), flush=True)
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "runs.csv", index=False)
    summary = []
    for variant, group in frame.groupby("variant", sort=False):
        mean, ci = figures.ci95(group["images_per_s"])
        cv = group["images_per_s"].std() / mean
        summary.append({"variant": variant, "runs": len(group), "mean_images_per_s": mean,
                        "min": group["images_per_s"].min(), "max": group["images_per_s"].max(), "cv_pct": 100 * cv,
                        "ci95_pct": 100 * ci / mean, "repeats_for_3pct": int((2 * cv / 0.03) ** 2) + 1,
                        "cpu_steal_s": group["cpu_steal_s"].mean(), "sm_clock_mhz": group["sm_clock_mhz"].mean()})
    table = pd.DataFrame(summary)
    table.to_csv(args.out / "summary.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))


if __name__ == "__main__":
    main()

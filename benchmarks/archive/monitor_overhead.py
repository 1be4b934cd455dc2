"""What the monitor costs the jobs it watches: aggregate throughput with the monitor off, at the default interval
and at 20 ms, for 1 and 7 ResNet-18 jobs (naive sharing), in one session with the order alternating per repeat.

    PYTHONPATH=$PWD python3 benchmarks/archive/monitor_overhead.py --out benchmarks/results/h100/monitor-overhead

Target (issue 4): under 1 % loss at the default interval. Writes OUT/overhead.json and OUT/overhead.csv: per copy
count and setting, the aggregate images/s of each repeat, the mean, the ratio to "off", and the monitor's own time
per sample (monitor.json's tick_ms_mean) and the share of one CPU core that makes (monitor_core_pct). Run-to-run
spread is reported next to the ratios: a loss smaller than the spread is not resolved by this run.
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.monitor import read_samples

DEFAULT_INTERVAL_S = inspect.signature(colloc_kit.run).parameters["monitor_interval_s"].default
SETTINGS = (("off", None), ("default", DEFAULT_INTERVAL_S), ("20ms", 0.02))


def measure(copies: int, interval_s: float | None, seconds: float, out: Path, job: dict, name: str) -> dict:
    """One naive run of `copies` jobs with the monitor at `interval_s` (None: off), in the experiment folder `name`:
    one per setting and repeat, since the kit resumes a folder's complete cells and the monitor is not part of a
    cell's identity."""
    results = colloc_kit.run([{**job, "seconds": seconds}], mode="naive", copies=copies, out=out / "runs",
                             name=name, monitor=interval_s is not None,
                             monitor_interval_s=interval_s or DEFAULT_INTERVAL_S, progress=False)
    run = results.runs.iloc[0]
    tick_ms = read_samples(Path(run["run_dir"]) / "monitor").info.get("tick_ms_mean") if interval_s else None
    return {"copies": copies, "aggregate_images_per_s": run["aggregate_images_per_s"],
            "throughput_window": run["throughput_window"],
            "failed_jobs": int((results.jobs["status"] != "complete").sum()),
            "tick_ms_mean": tick_ms, "run_dir": run["run_dir"]}


def table(rows: pd.DataFrame) -> pd.DataFrame:
    stats = rows.groupby(["copies", "setting"], sort=False).agg(
        runs=("aggregate_images_per_s", "count"), images_per_s=("aggregate_images_per_s", "mean"),
        low=("aggregate_images_per_s", "min"), high=("aggregate_images_per_s", "max"),
        tick_ms_mean=("tick_ms_mean", "mean"), failed_jobs=("failed_jobs", "sum")).reset_index()
    off = stats[stats["setting"] == "off"].set_index("copies")["images_per_s"]
    stats["ratio_to_off"] = stats["images_per_s"] / stats["copies"].map(off)
    stats["loss_pct"] = 100 * (1 - stats["ratio_to_off"])
    stats["spread_pct"] = 100 * (stats.pop("high") - stats.pop("low")) / stats["images_per_s"]
    intervals = dict((name, interval) for name, interval in SETTINGS)
    stats["monitor_core_pct"] = stats["tick_ms_mean"] / (1000 * stats["setting"].map(intervals)) * 100
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", default="1,7", help="comma-separated job counts")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="training seconds per job and run")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script, not a measurement")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/monitor-overhead"))
    args = parser.parse_args()
    job = {"model": args.model, "batch_size": args.batch_size, "device": args.device, "warmup_steps": 20,
           **({"amp": "bf16", "channels_last": True} if args.device == "cuda" else {"image_size": 32, "workers": 0})}
    rows = []
    for repeat in range(args.repeats):
        for copies in (int(c) for c in args.copies.split(",")):
            order = SETTINGS if (repeat + copies) % 2 == 0 else SETTINGS[::-1]  # alternate, so drift cancels
            for setting, interval_s in order:
                row = measure(copies, interval_s, args.seconds, args.out, job, f"monitor-overhead-{setting}-{repeat}")
                rows.append({"repeat": repeat, "setting": setting, "interval_s": interval_s, **row})
                print(f"repeat {repeat} copies {copies} {setting:>7}: {row['aggregate_images_per_s'] or 0:,.0f} img/s",
                      flush=True)
    frame = pd.DataFrame(rows)
    stats = table(frame)
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"job": job, "seconds": args.seconds, "default_interval_s": DEFAULT_INTERVAL_S, "target_loss_pct": 1.0,
              "runs": rows, "summary": stats.to_dict(orient="records")}
    (args.out / "overhead.json").write_text(json.dumps(report, indent=2, default=str))
    stats.to_csv(args.out / "overhead.csv", index=False)
    print(stats.to_string(index=False))


if __name__ == "__main__":
    main()

"""How closely the start barrier releases N jobs: skew of their first training step and of their steady window.

    python benchmarks/archive/start_skew.py --copies 7 --repeats 3 \
        --out benchmarks/results/h100/start-skew/start_skew.json

Target (issue 2): the last job starts its first timed step within 50 ms of the first. "First step" is the `start`
event each worker emits when the barrier lets it go; the steady-window start (end of warm-up) is reported too, since
jobs that share a GPU reach it at different times.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import colloc_kit
from colloc_kit import events
from colloc_kit.analysis.figures import steady_span
from colloc_kit.store.rundir import read_events

TARGET_MS = 50.0


def skews(run_dir: Path) -> dict:
    streams = [read_events(p) for p in sorted((run_dir / "jobs").glob("*.events.jsonl"))]
    starts = [e["t"] for s in streams for e in s if e["type"] == events.START]
    readies = [e["t"] for s in streams for e in s if e["type"] == events.READY]
    steady = [w[0] for w in map(steady_span, streams) if w]
    spread_ms = lambda xs: 1000 * (max(xs) - min(xs)) if xs else None  # noqa: E731
    return {"jobs": len(streams), "start_skew_ms": spread_ms(starts), "ready_spread_ms": spread_ms(readies),
            "steady_start_skew_ms": spread_ms(steady)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/start-skew/start_skew.json"))
    args = parser.parse_args()
    job = {"model": args.model, "batch_size": args.batch_size, "device": args.device, "steps": 40, "warmup_steps": 10,
           **({"amp": "bf16", "channels_last": True} if args.device == "cuda" else {"image_size": 32, "workers": 0})}
    results = colloc_kit.run([job], mode="naive", copies=args.copies, repeats=args.repeats, monitor=False,
                             out=args.out.parent / "start_skew_runs", name="start-skew", progress=False)
    figures = [skews(Path(d)) for d in results.runs["run_dir"]]
    worst = max(f["start_skew_ms"] for f in figures)
    report = {"config": job, "copies": args.copies, "runs": figures, "worst_start_skew_ms": worst,
              "target_ms": TARGET_MS, "met": worst <= TARGET_MS}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

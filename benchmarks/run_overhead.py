"""What a run costs beyond its measured window: wall time per run minus the window, with where the rest goes.

    python benchmarks/run_overhead.py --device cuda --model resnet50 --batch-size 128 --amp bf16 --seconds 5 \
        --repeats 3 --out benchmarks/results/h100/run_overhead-after.json
    python benchmarks/run_overhead.py --device cpu --model smallcnn --image-size 32 --seconds 2 --out overhead-cpu.json

Target (issue 10): at most 6 s over the window on the H100 for ResNet-50 at batch 128. Each repeat is one experiment
of one exclusive run (so the experiment's one-off costs count too); phases come from the events (kit clock):
`to_ready` (process start, imports, CUDA, model build, first batch, priming), `barrier` (ready to start), `warmup`,
`window`, `held` (training on past the budget), `after` (end of training to the run's end: exit, teardown, reading);
`to_ready` split where the worker reports it: `before_launch` (the kit's checks, run folder, mode, monitor),
`imports`, `build` (CUDA, model, data, first batch), `primed`.
Uses only the public API, so the same script measures an older checkout (PYTHONPATH=that checkout).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import colloc_kit


def one_run(job: dict, out: Path, name: str) -> dict:
    t0 = time.time()
    results = colloc_kit.run([job], mode="exclusive", copies=1, out=out, name=name, progress=False)
    wall = time.time() - t0
    row = results.jobs.iloc[0]
    window = float(row["steady_s"] or 0.0)
    ready, start, end = float(row["ready_at"]), float(row["started_at"]), float(row["ended_at"])
    held = float(row.get("held_s") or 0.0) if "held_s" in row else 0.0
    phases = {k: float(row[k]) for k in ("imports_s", "build_s", "primed_s") if k in row and row[k] == row[k]}
    if "launched_at" in row and row["launched_at"] == row["launched_at"]:
        phases["before_launch_s"] = float(row["launched_at"]) - t0  # the kit's side: checks, run folder, mode, monitor
    return {**phases, "wall_s": wall, "window_s": window, "overhead_s": wall - window, "to_ready_s": ready - t0,
            "barrier_s": start - ready, "warmup_s": (end - start) - window - held, "held_s": held,
            "after_s": t0 + wall - end, "images_per_s": float(row["images_per_s"] or 0.0), "status": row["status"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--amp", default="bf16")
    parser.add_argument("--image-size", type=int)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="", help="what is measured, e.g. 'before' or a commit")
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the figures")
    args = parser.parse_args()
    job = {"model": args.model, "batch_size": args.batch_size, "amp": args.amp, "device": args.device,
           "seconds": args.seconds, "warmup_steps": args.warmup_steps, "channels_last": args.device == "cuda"}
    if args.image_size:
        job["image_size"] = args.image_size
    runs_dir = args.out.with_suffix("")
    rows = [one_run(job, runs_dir, f"overhead-{i}") for i in range(args.repeats)]
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0] if k != "status"}
    report = {"label": args.label, "job": job, "runs": rows, "mean": mean}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"{args.label or 'overhead'}: {mean['overhead_s']:.1f} s over a {mean['window_s']:.1f} s window "
          f"(wall {mean['wall_s']:.1f} s; to ready {mean['to_ready_s']:.1f}, warm-up {mean['warmup_s']:.1f}, "
          f"held {mean['held_s']:.1f}, after {mean['after_s']:.1f}) over {len(rows)} runs")


if __name__ == "__main__":
    main()

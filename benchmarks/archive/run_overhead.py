"""What a run costs beyond its measured window: wall time per run minus the window, with where the rest goes.

    python benchmarks/archive/run_overhead.py --device cuda --model resnet50 --batch-size 128 --amp bf16 --seconds 5 \
        --repeats 3 --runs 3 --out benchmarks/results/h100/run-overhead/overhead_zygote.json
    python benchmarks/archive/run_overhead.py --device cpu --model smallcnn --image-size 32 --seconds 2 \
        --out overhead-cpu.json

Target (issue 10): at most 6 s over the window on the H100 for ResNet-50 at batch 128. Two figures:
- single (`runs`, `mean`): each of `--repeats` experiments runs one exclusive run, so every one-off cost of an
  experiment (machine description, the zygote's imports) counts;
- multi (`multi`, with `--runs N` > 1): one experiment of N runs; run 1 pays the one-off costs, runs 2..N
  (`multi.rest_mean`) show what each further run of a matrix costs. A run's wall time there is from the previous
  run's end (as the progress bar saw it) to its own.
Phases come from the events (kit clock): `to_ready` (process start, imports, CUDA, model build, first batch,
priming), `barrier` (ready to start), `warmup`, `window`, `held` (training on past the budget), `after` (end of
training to the run's end: exit, teardown, reading); `to_ready` split where the worker reports it: `before_launch`
(the kit's checks, run folder, mode, monitor), `imports` (0 for a worker forked from the zygote: it starts imported),
`build` (CUDA, model, data, first batch), `primed`.
Uses only the public API, so the same script measures an older checkout (PYTHONPATH=that checkout), and
COLLOC_KIT_ZYGOTE=0 measures this one without its zygote.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import colloc_kit
from colloc_kit.pipeline.progress import Progress


class RunClock(Progress):
    """The progress bar's view of an experiment, silent, keeping when each run finished."""

    def __init__(self, total_runs: int):
        super().__init__(total_runs, enabled=False)
        self.finished: list[float] = []

    def run_finished(self, summary: str) -> None:
        self.finished.append(time.time())
        super().run_finished(summary)


def experiment(job: dict, out: Path, name: str, runs: int) -> list[dict]:
    """One experiment of `runs` exclusive runs of `job`; the figures of each run, in order."""
    clock = RunClock(runs)
    t0 = time.time()
    results = colloc_kit.run([job], mode="exclusive", copies=1, repeats=runs, out=out, name=name, progress=clock)
    t_end = time.time()
    rows = results.jobs.sort_values("ready_at").reset_index(drop=True)
    begins = [t0, *clock.finished[:-1]]
    ends = [*clock.finished[:-1], t_end]  # the last run's end: when run() returned (the experiment's reading too)
    return [run_figures(row, begin, end) for (_, row), begin, end in zip(rows.iterrows(), begins, ends)]


def run_figures(row, t0: float, t_end: float) -> dict:
    window = float(row["steady_s"] or 0.0)
    ready, start, end = float(row["ready_at"]), float(row["started_at"]), float(row["ended_at"])
    held = float(row.get("held_s") or 0.0) if "held_s" in row else 0.0
    phases = {k: float(row[k]) for k in ("imports_s", "build_s", "primed_s") if k in row and row[k] == row[k]}
    if "launched_at" in row and row["launched_at"] == row["launched_at"]:
        phases["before_launch_s"] = float(row["launched_at"]) - t0  # the kit's side: checks, run folder, mode, monitor
    wall = t_end - t0
    return {**phases, "wall_s": wall, "window_s": window, "overhead_s": wall - window, "to_ready_s": ready - t0,
            "barrier_s": start - ready, "warmup_s": (end - start) - window - held, "held_s": held,
            "after_s": t_end - end, "images_per_s": float(row["images_per_s"] or 0.0), "status": row["status"]}


def mean(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if k != "status" and all(k in r for r in rows)]
    return {k: sum(r[k] for r in rows) / len(rows) for k in keys}


def say(label: str, m: dict, n: int) -> str:
    return (f"{label}: {m['overhead_s']:.1f} s over a {m['window_s']:.1f} s window (wall {m['wall_s']:.1f} s; "
            f"to ready {m['to_ready_s']:.1f} [before launch {m.get('before_launch_s', float('nan')):.1f}, imports "
            f"{m.get('imports_s', float('nan')):.1f}, build {m.get('build_s', float('nan')):.1f}, primed "
            f"{m.get('primed_s', float('nan')):.1f}], warm-up {m['warmup_s']:.1f}, held {m['held_s']:.1f}, "
            f"after {m['after_s']:.1f}) over {n} run(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--amp", default="bf16")
    parser.add_argument("--image-size", type=int)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="experiments of one run each (the single figure)")
    parser.add_argument("--runs", type=int, default=1, help="runs of the multi-run experiment (1: none)")
    parser.add_argument("--label", default="", help="what is measured, e.g. 'before' or a commit")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/run-overhead/overhead.json"),
                        help="JSON file for the figures")
    args = parser.parse_args()
    job = {"model": args.model, "batch_size": args.batch_size, "amp": args.amp, "device": args.device,
           "seconds": args.seconds, "warmup_steps": args.warmup_steps, "channels_last": args.device == "cuda"}
    if args.image_size:
        job["image_size"] = args.image_size
    runs_dir = args.out.with_suffix("") / time.strftime("%Y%m%d-%H%M%S")  # new experiments: none resumed
    rows = [experiment(job, runs_dir, f"overhead-{i}", 1)[0] for i in range(args.repeats)]
    report = {"label": args.label, "job": job, "runs": rows, "mean": mean(rows)}
    lines = [say(args.label or "single", report["mean"], len(rows))]
    if args.runs > 1:
        multi = experiment(job, runs_dir, "overhead-multi", args.runs)
        report["multi"] = {"runs_per_experiment": args.runs, "runs": multi, "first": multi[0],
                           "rest_mean": mean(multi[1:])}
        lines += [say("multi, run 1", multi[0], 1), say(f"multi, runs 2..{args.runs}", report["multi"]["rest_mean"],
                                                         args.runs - 1)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

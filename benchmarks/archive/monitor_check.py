"""The issue-4 check on a GPU: one run of 4 naive ResNet-50 jobs with the monitor on; are its figures plausible?

    PYTHONPATH=$PWD python3 benchmarks/archive/monitor_check.py --out benchmarks/results/h100/monitor-check

Prints one PASS/FAIL line per check and writes OUT/check.json (checks, the window's summary, monitor.json) and
OUT/samples_gpu.csv. Checks: GPM columns present; SM util within 0-100; SM occupancy at or below SM util; the
energy counter never decreasing; per-process GPU memory attributed to all 4 jobs; over the jobs' common steady
window, energy from the counter within 5 % of power integrated over the samples.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import colloc_kit
from colloc_kit.analysis.figures import common_window
from colloc_kit.monitor import read_samples, summarize
from colloc_kit.store.rundir import RunDir, read_events

COPIES = 4


def checks(samples, summary: dict | None) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for each check of the issue."""
    gpu, process = samples.gpu, samples.process
    gpm_columns = {"sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct"}
    gpm = gpu.dropna(subset=["sm_util_pct"]) if gpm_columns <= set(gpu.columns) else None
    energy = gpu["energy_mj"].dropna() if "energy_mj" in gpu.columns else None
    jobs = sorted(set(process["job"].dropna())) if "job" in process.columns else []
    out = [("GPM columns present", gpm is not None and len(gpm) > 0,
            f"{0 if gpm is None else len(gpm)} of {len(gpu)} rows carry GPM values; absent columns: "
            f"{samples.info.get('series', {}).get('samples_gpu', {}).get('absent')}")]
    if gpm is not None and len(gpm):
        sm, occupancy = gpm["sm_util_pct"], gpm["sm_occupancy_pct"]
        out += [("SM util within 0-100", bool(sm.between(0, 100).all()), f"min {sm.min():.1f}, max {sm.max():.1f}"),
                ("SM occupancy at or below SM util", bool((occupancy <= sm + 0.5).all()),
                 f"means: occupancy {occupancy.mean():.1f} %, SM util {sm.mean():.1f} %; "
                 f"rows above: {int((occupancy > sm + 0.5).sum())}")]
    increasing = energy is not None and len(energy) > 1 and bool((energy.diff() >= 0)[1:].all())
    out.append(("energy counter increasing", increasing,
                f"{0 if energy is None else len(energy)} readings"))
    out.append((f"GPU memory attributed to all {COPIES} jobs", len(jobs) == COPIES, f"jobs in samples_process: {jobs}"))
    counter = summary and summary["energy_j"]
    integral = summary and summary["energy_power_integral_j"]
    if counter and integral:
        gap = abs(counter - integral) / integral
        out.append(("counter energy within 5 % of the power integral", gap <= 0.05,
                    f"counter {counter:.0f} J, power integral {integral:.0f} J over {summary['sampled_s']:.1f} s "
                    f"of common steady state; gap {100 * gap:.2f} %"))
    else:
        out.append(("counter energy within 5 % of the power integral", False, f"not computable: {summary}"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="training seconds per job")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/monitor-check"))
    args = parser.parse_args()
    job = {"model": "resnet50", "batch_size": 64, "amp": "bf16", "channels_last": True, "seconds": args.seconds}
    results = colloc_kit.run([job], mode="naive", copies=COPIES, out=args.out / "runs", name="monitor-check",
                             monitor=True, progress=False)
    run = RunDir(results.runs["run_dir"].iloc[0])
    samples = read_samples(run.monitor_dir)
    found = common_window({e.job: read_events(run.events_path(e.job)) for e in run.read_manifest().jobs})
    window = (found.start, found.end) if found else None
    summary = summarize(samples.gpu, *window) if window else None
    outcome = checks(samples, summary)
    for name, ok, detail in outcome:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    args.out.mkdir(parents=True, exist_ok=True)
    samples.gpu.to_csv(args.out / "samples_gpu.csv", index=False)
    report = {"job": job, "copies": COPIES, "run_dir": str(run.path), "window": window, "summary": summary,
              "aggregate_images_per_s": results.runs["aggregate_images_per_s"].iloc[0],
              "checks": [{"check": n, "pass": bool(ok), "detail": d} for n, ok, d in outcome],
              "monitor": samples.info}
    (args.out / "check.json").write_text(json.dumps(report, indent=2, default=str))
    return 0 if all(ok for _, ok, _ in outcome) else 1


if __name__ == "__main__":
    sys.exit(main())

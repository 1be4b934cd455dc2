"""Replay shipped runs' progress intervals under candidate window rules: how many seconds each rule saves, and how far
its run figure lands from the full window's.

    python benchmarks/archive/window_replay.py benchmarks/results/h100/seed/seed-runs.tgz \
        --out benchmarks/results/h100/window-replay/window-replay.md

CPU only. Every complete run's jobs are replayed as their workers saw them: after warm-up, one progress interval at a
time, each rule asked at each interval's end whether the window may stop (the worker's `_Meter._precise`), a fixed
window cut where it ends (pro rata inside the interval, as a worker ends on the step that passes it). A run's window
ends when every job's rule has said stop (jobs that share the device keep training until then: the launcher's stop
protocol), so its streams are cut there and `figures.run_throughput` gives the run's aggregate images/s and its CI
over the cut window, compared with the same figure over the run's full window (the reference). Jobs run alone or one
after another are cut each at its own stop. Writes `<out>.md` (the table per rule) and `<out>.csv` (one row a run and
rule).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

from colloc_kit.analysis import figures
from colloc_kit.atomic import write_text
from colloc_kit.stats import relative_ci95
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.rundir import RunDir, find_runs, read_events

__all__ = ["RULES", "Rule", "block_rates", "replay_run", "replay", "precision", "summary", "main"]

KINDS = ("alone", "together")
Intervals = Sequence[tuple[float, float, float]]  # (seconds since the window began at this interval's end, s, images)


@dataclass(frozen=True)
class Rule:
    """A window rule: `stop(intervals)` is the elapsed seconds where a job's window ends (at most its full window)."""

    name: str
    stop: Callable[[Intervals], float]


def fixed(seconds: float) -> Rule:
    """A window of `seconds` (cut pro rata: the worker ends on the step that passes it)."""
    return Rule(f"fixed {seconds:g} s", lambda ivs: min(seconds, ivs[-1][0]))


def sequential_stop(name: str, precise: Callable[[Intervals], bool], min_s: float) -> Rule:
    """Asked at each interval's end from `min_s` on: the first end where `precise(intervals so far)` holds."""
    def stop(ivs: Intervals) -> float:
        for k, (elapsed, _, _) in enumerate(ivs):
            if elapsed >= min_s and precise(ivs[:k + 1]):
                return elapsed
        return ivs[-1][0]
    return Rule(name, stop)


def interval_ci(target: float, min_s: float) -> Rule:
    """Today's `until_ci`: the CI of the intervals' images/s, each interval one value."""
    return sequential_stop(f"interval CI {target:g}, min {min_s:g} s",
                           lambda ivs: relative_ci95(i / s for _, s, i in ivs if s > 0) <= target, min_s)


def block_rates(intervals: Iterable[tuple[float, float]], block_s: float) -> list[float]:
    """Rates of consecutive blocks of whole (seconds, images) intervals, each at least `block_s` long, a short
    remainder joining the last block (batch means: a burst and the lull after it fall in one block).

    >>> block_rates([(1.0, 384), (1.0, 256), (1.0, 384), (1.0, 256), (0.5, 128)], 2.0)
    [320.0, 307.2]
    """
    blocks: list[list[float]] = []
    open_s = open_n = 0.0
    for seconds, count in intervals:
        open_s, open_n = open_s + seconds, open_n + count
        if open_s >= block_s:
            blocks.append([open_s, open_n])
            open_s = open_n = 0.0
    if open_s > 0 and blocks:
        blocks[-1][0] += open_s
        blocks[-1][1] += open_n
    return [n / s for s, n in blocks if s > 0]


def block_ci(target: float, min_s: float, block_s: float = 2.0) -> Rule:
    """The CI of the images/s of blocks of whole intervals at least `block_s` long (batch means)."""
    return sequential_stop(f"{block_s:g}-s block CI {target:g}, min {min_s:g} s",
                           lambda ivs: relative_ci95(block_rates([(s, i) for _, s, i in ivs], block_s)) <= target,
                           min_s)


def halves(target: float, min_s: float) -> Rule:
    """The two halves of the window so far (split at the interval edge nearest its middle) agree within `target`."""
    def precise(ivs: Intervals) -> bool:
        elapsed = ivs[-1][0]
        k = min(range(len(ivs)), key=lambda j: abs(ivs[j][0] - elapsed / 2))
        first, second = ivs[:k + 1], ivs[k + 1:]
        if not second:
            return False
        rate = [sum(i for _, _, i in part) / sum(s for _, s, _ in part) for part in (first, second)]
        return abs(rate[0] - rate[1]) / (sum(i for _, _, i in ivs) / elapsed) <= target
    return sequential_stop(f"halves agree {target:g}, min {min_s:g} s", precise, min_s)


RULES = [fixed(s) for s in (5, 6, 7, 8, 9, 10, 12)] + \
    [interval_ci(t, m) for t, m in ((0.01, 3), (0.01, 4), (0.01, 5), (0.02, 5), (0.02, 6), (0.02, 8), (0.05, 5),
                                    (0.05, 6), (0.05, 8))] + \
    [block_ci(t, m) for t, m in ((0.02, 5), (0.02, 6), (0.02, 8), (0.05, 5), (0.05, 6), (0.05, 8))] + \
    [halves(t, m) for t, m in ((0.01, 5), (0.01, 6), (0.02, 5), (0.02, 8))]


def _cut(stream: list[dict], end: float) -> list[dict]:
    """A job's events up to kit time `end`: the interval across it clipped pro rata, later ones dropped."""
    out = []
    for e in stream:
        if e.get("type") != "interval" or e["t"] <= end:
            out.append(e)
        elif e["t"] - e["interval_s"] < end:
            share = (end - (e["t"] - e["interval_s"])) / e["interval_s"]
            out.append({**e, "t": end, "interval_s": e["interval_s"] * share,
                        "interval_images": e["interval_images"] * share})
    return out


def _relative(figure: dict) -> float:
    value, ci = figure["aggregate_images_per_s"], figure["aggregate_images_per_s_ci"]
    return ci / value if value and ci is not None and not math.isnan(ci) else math.nan


def replay_run(run: RunDir, rules: Sequence[Rule] = RULES) -> list[dict]:
    """One row per rule for a complete run: its window, the seconds it saves, its figure vs the full window's.

    Long: reads the run once, then cuts its streams once per rule.
    """
    manifest = run.read_manifest()
    if manifest.status != COMPLETE:
        return []
    streams = {job.job: read_events(run.events_path(job.job)) for job in manifest.jobs}
    statuses = {job.job: str(job.outcome.status) if job.outcome else "" for job in manifest.jobs}
    full = figures.run_throughput(streams, statuses, manifest.sequential)
    if not full["aggregate_images_per_s"] or full["throughput_window"] == "own":
        return []
    alone = manifest.sequential or len(streams) == 1
    measured = {job: figures.steady_intervals(s, held=False) for job, s in streams.items()}
    starts = {job: ivs[0]["t"] - ivs[0]["interval_s"] for job, ivs in measured.items() if ivs}
    own = {job: [(e["t"] - starts[job], e["interval_s"], e["interval_images"]) for e in ivs]
           for job, ivs in measured.items() if ivs}
    specs = sorted(json.dumps(job.spec, sort_keys=True) for job in manifest.jobs)
    key = [manifest.experiment, manifest.mode.label, *specs]
    cell = hashlib.sha1("; ".join(map(str, key)).encode()).hexdigest()[:10]  # the same jobs, mode and copies
    rows = []
    for rule in rules:
        stops = {job: rule.stop(ivs) for job, ivs in own.items()}
        ends = {job: starts[job] + stop for job, stop in stops.items()}
        if alone:
            cut = {job: _cut(s, ends[job]) if job in ends else s for job, s in streams.items()}
            saved = sum(ivs[-1][0] - stops[job] for job, ivs in own.items())
        else:
            end = max(ends.values())
            cut = {job: _cut(s, end) for job, s in streams.items()}
            saved = max(starts[job] + ivs[-1][0] for job, ivs in own.items()) - end
        short = figures.run_throughput(cut, statuses, manifest.sequential)
        rows.append({"experiment": manifest.experiment, "run_id": manifest.run_id,
                     "kind": "alone" if alone else "together", "mode": manifest.mode.label,
                     "copies": len(streams), "cell": cell, "rule": rule.name,
                     "job_window_s": sum(stops.values()) / len(stops), "saved_s": saved,
                     "full": full["aggregate_images_per_s"], "cut": short["aggregate_images_per_s"],
                     "full_ci": _relative(full), "cut_ci": _relative(short)})
    return rows


def replay(root: Path, rules: Sequence[Rule] = RULES) -> pd.DataFrame:
    """Every complete run under `root` replayed under every rule (one row a run and rule)."""
    frame = pd.DataFrame([row for run in find_runs(root) for row in replay_run(run, rules)])
    frame["error"] = (frame["cut"] - frame["full"]).abs() / frame["full"]
    frame["within_full_ci"] = frame["error"] <= frame["full_ci"]
    return frame


def summary(frame: pd.DataFrame, rules: Sequence[Rule] = RULES) -> pd.DataFrame:
    """Per rule: mean job window, seconds saved per cell, |cut - full| / full over runs (median, p95, max), and per
    kind of run (alone, together) the share of runs within the full window's own 95 % CI and the median CI reported."""
    rows = []
    for rule in rules:
        part = frame[frame["rule"] == rule.name]
        by_kind = dict(list(part.groupby("kind")))
        rows.append({"rule": rule.name, "job window s": part["job_window_s"].mean(),
                     "saved s/cell": part["saved_s"].mean(),
                     "error median %": 100 * part["error"].median(),
                     "error p95 %": 100 * part["error"].quantile(0.95), "error max %": 100 * part["error"].max(),
                     **{f"error p95 % ({kind})": 100 * by_kind[kind]["error"].quantile(0.95) for kind in KINDS},
                     **{f"within own CI % ({kind})": 100 * by_kind[kind]["within_full_ci"].mean() for kind in KINDS},
                     **{f"CI median % ({kind})": 100 * by_kind[kind]["cut_ci"].median() for kind in KINDS}})
    return pd.DataFrame(rows)


def precision(frame: pd.DataFrame) -> pd.DataFrame:
    """The reference set's own precision per kind of run: the median relative 95 % CI of its full-window figures,
    and where a cell ran more than once (the same jobs, mode and copies), the median relative spread (max - min over
    the mean) of its runs' figures."""
    runs = frame.drop_duplicates("run_id")
    spread = runs.groupby(["kind", "cell"])["full"].agg(["count", "min", "max", "mean"])
    spread = spread[spread["count"] > 1]
    spread["spread"] = (spread["max"] - spread["min"]) / spread["mean"]
    rows = []
    for kind in KINDS:
        mine = spread.loc[kind] if kind in spread.index.get_level_values(0) else spread.iloc[0:0]
        rows.append({"kind": kind, "runs": int((runs["kind"] == kind).sum()),
                     "median CI %": 100 * runs[runs["kind"] == kind]["full_ci"].median(),
                     "cells run twice or more": len(mine), "median spread %": 100 * mine["spread"].median()})
    return pd.DataFrame(rows)


def _markdown(table: pd.DataFrame) -> str:
    """A table for readers: formatted numbers, no index."""
    cells = [[f"{v:,.2f}" if isinstance(v, float) else str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def report(frame: pd.DataFrame, data: str, command: str) -> str:
    """The replay as markdown: what it read, the reference set's precision, the table per rule."""
    n = frame.drop_duplicates("run_id")["kind"].value_counts()
    return (f"# Window rules replayed on shipped runs\n\n`{command}`\n\nData: `{data}` ({n.sum()} complete runs: "
            f"{n.get('alone', 0)} of jobs alone or one after another, {n.get('together', 0)} of jobs sharing the "
            "device). Error: |aggregate images/s over the cut window - over the full 15-s window| / full, over "
            "runs. Within own CI: the share of runs whose error is at most the full window's own 95 % CI "
            "half-width (the figure the reference reports). CI: the run figure's relative 95 % CI half-width over "
            "the cut window (figures.run_throughput). Saved: seconds of window per cell against 15-s windows.\n\n"
            f"## The reference set's own precision\n\n{_markdown(precision(frame))}\n\n"
            f"## Rules\n\n{_markdown(summary(frame))}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="a folder of runs, or a .tgz of one")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/window-replay/window-replay.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.data
        if args.data.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(args.data) as archive:
                archive.extractall(tmp, filter="data")
            root = Path(tmp)
        frame = replay(root)
    command = f"python benchmarks/archive/window_replay.py {args.data} --out {args.out}"
    text = report(frame, str(args.data), command)
    write_text(args.out.with_suffix(".md"), text)
    write_text(args.out.with_suffix(".csv"), frame.to_csv(index=False, float_format="%.5g"))
    print(text)


if __name__ == "__main__":
    main()

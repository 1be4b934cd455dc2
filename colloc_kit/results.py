"""Read run directories into tidy pandas frames: `.jobs`, `.epochs`, `.runs` (and `.samples` from the monitor).

Everything is derived from the manifests and the raw event logs, so analysis can re-cut windows later and a run
killed half-way is still read (its status says so).

    >>> results = load("runs/demo")                                      # doctest: +SKIP
    >>> results.jobs[["run_id", "job", "status", "images_per_s"]]
    >>> results.runs[["mode", "copies", "aggregate_images_per_s"]]
    >>> results.jobs[["job", "sm_occupancy_pct_mean", "energy_per_image_j"]]     # where a GPU was monitored

Throughput: a job's `images_per_s` is over its own steady-state window (after warm-up). For jobs that ran together,
`images_per_s_overlap` counts only the interval events inside the window where every job of the run was in steady
state; a run's `aggregate_images_per_s` is the sum of those (or of the jobs' own rates where the jobs did not
overlap), and for sequential (exclusive) runs it is all steady images over all steady time.

GPU metrics (the monitor's samples) are summarised over each job's measurement window (the common window of the
run's jobs, or the job's own steady window when it ran alone) and joined onto its row: `<metric>_mean/_p50/_p95`,
`energy_j` and `energy_per_image_j` (the window's energy over all images the device trained in it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import events
from .monitor import Samples, read_samples, summarize
from .rundir import RUNNING, RunDir, find_runs, read_events

MIN_OVERLAP_S = 1.0  # a shorter common window is too short to measure in
RunReading = tuple[list[dict], list[dict], dict, Samples]  # one run's job rows, epoch rows, summary, samples


@dataclass
class Results:
    """Tidy frames of one or more runs. Column names carry units (`_s`, `_mb`, `_per_s`, `_pct`, `_j`)."""

    jobs: pd.DataFrame
    epochs: pd.DataFrame
    runs: pd.DataFrame
    samples: pd.DataFrame = field(default_factory=pd.DataFrame)  # GPU time series, one row per sample per run
    host_samples: pd.DataFrame = field(default_factory=pd.DataFrame)  # host CPU and memory series

    def __repr__(self) -> str:
        return f"Results({len(self.runs)} runs, {len(self.jobs)} jobs, {len(self.epochs)} epochs, {len(self.samples)} samples)"


def load(path: str | Path | list) -> Results:
    """Read one run directory, a folder of them (searched recursively), or a list of either."""
    paths = path if isinstance(path, list) else [path]
    return assemble([read_run(run) for p in paths for run in find_runs(p)])


def assemble(readings: list[RunReading]) -> Results:
    """Results from runs already read by `read_run` (an experiment reads each run as it ends)."""
    job_rows, epoch_rows, run_rows, gpu_frames, host_frames = [], [], [], [], []
    for jobs, epochs, summary, samples in readings:
        job_rows += jobs
        epoch_rows += epochs
        run_rows.append(summary)
        gpu_frames.append(samples.gpu.assign(run_id=summary["run_id"]))
        host_frames.append(samples.host.assign(run_id=summary["run_id"]))
    return Results(jobs=pd.DataFrame(job_rows), epochs=pd.DataFrame(epoch_rows), runs=pd.DataFrame(run_rows),
                   samples=_concat(gpu_frames), host_samples=_concat(host_frames))


def read_run(run: RunDir) -> RunReading:
    """Rows for one run: its jobs, its epochs, its summary, and the monitor's samples."""
    manifest = run.read_manifest()
    status = manifest.get("status", RUNNING)
    if status == RUNNING:
        status = "interrupted"  # the process that ran it died before completing the manifest
    base = {"run_id": run.run_id, "experiment": manifest.get("experiment"), "mode": manifest["mode"]["name"],
            "mode_label": manifest["mode"].get("label"), "copies": manifest.get("copies"),
            "repeat": manifest.get("repeat"), "sequential": bool(manifest.get("sequential")), **_where(manifest)}
    streams = {entry["job"]: read_events(run.events_path(entry["job"])) for entry in manifest.get("jobs", [])}
    jobs = [job_row(entry, streams[entry["job"]], base) for entry in manifest.get("jobs", [])]
    sequential = base["sequential"]
    window = None if sequential else overlap_window(list(streams.values()))
    samples = read_samples(run.path)
    monitored = len(samples.gpu) > 0
    shared = gpu_summary(samples.gpu, window, streams.values()) if monitored and window else {}  # one for all jobs
    for row in jobs:
        row["images_per_s_overlap"] = window_rate(streams[row["job"]], window) if window else None
        row["run_status"] = status
        row["run_dir"] = str(run.path)
        own_window = steady_window(streams[row["job"]]) if sequential else None  # jobs in turn: each its own window
        row.update(gpu_summary(samples.gpu, own_window, [streams[row["job"]]]) if monitored and own_window else shared)
    epochs = [{**base, "job": job, "epoch": e["epoch"], "epoch_time_s": e.get("epoch_time_s"), "images": e.get("images"),
               "images_per_s": e.get("images_per_s"), "t": e["t"]}
              for job, stream in streams.items() for e in stream if e["type"] == events.EPOCH]
    summary = {**base, "status": status, "n_jobs": len(jobs),
               "n_complete": sum(r["status"] == "complete" for r in jobs),
               **aggregate(jobs, sequential, window), "problems": "; ".join(manifest.get("problems") or []) or None,
               "started_at": manifest.get("started_at"), "ended_at": manifest.get("ended_at"), "run_dir": str(run.path)}
    return jobs, epochs, summary, samples


def job_row(entry: dict, stream: list[dict], base: dict) -> dict:
    """One job's row from its manifest entry (spec, slot, outcome) and its events."""
    last = {e["type"]: e for e in stream}
    end, ready, error = last.get(events.END, {}), last.get(events.READY, {}), last.get(events.ERROR, {})
    outcome = entry.get("outcome") or _outcome_from_events(last)
    spec = entry["spec"]
    slot = entry.get("slot") or {}  # None until the mode handed out slots
    epoch_times = [e["epoch_time_s"] for e in stream if e["type"] == events.EPOCH and e.get("epoch_time_s")]
    gpu_peak = end.get("peak_allocated_mb")
    row = {
        **base, "job": entry["job"], "group": entry.get("group"), "slot_label": slot.get("label"),
        "model": spec["model"], "dataset": spec["dataset"], "batch_size": spec["batch_size"], "amp": spec["amp"],
        "device": spec["device"], "status": outcome["status"], "error_kind": outcome.get("error_kind"),
        "error": outcome.get("error") or error.get("message"), "exit_code": outcome.get("exit_code"),
        "mode_problem": outcome.get("mode_problem"),
        "images_per_s": end.get("images_per_s"),
        "epoch_time_s": _epoch_time(epoch_times),
        "step_time_s": spec["batch_size"] / end["images_per_s"] if end.get("images_per_s") else None,
        "steady_s": end.get("steady_s"), "steps": end.get("steps"), "images": end.get("images"),
        "peak_memory_mb": gpu_peak if gpu_peak is not None else end.get("peak_rss_mb"),
        "peak_gpu_allocated_mb": gpu_peak, "peak_gpu_reserved_mb": end.get("peak_reserved_mb"),
        "peak_host_rss_mb": end.get("peak_rss_mb"),
        "ready_at": ready.get("t"), "started_at": last.get(events.START, {}).get("t"), "ended_at": end.get("t"),
    }
    row.update({f"slot_{k}": v for k, v in (slot.get("info") or {}).items()})
    return row


def steady_window(stream: list[dict]) -> tuple[float, float] | None:
    """(start, end) wall-clock times of a job's steady-state interval events, or None if it had none."""
    steady = [e for e in stream if e["type"] == events.INTERVAL and not e.get("warmup")]
    if not steady:
        return None
    return steady[0]["t"] - steady[0]["interval_s"], steady[-1]["t"]


def overlap_window(streams: list[list[dict]]) -> tuple[float, float] | None:
    """The window in which every job was in steady state, if it lasts at least MIN_OVERLAP_S."""
    windows = [steady_window(s) for s in streams]
    if not windows or any(w is None for w in windows):
        return None
    start, end = max(w[0] for w in windows), min(w[1] for w in windows)
    return (start, end) if end - start >= MIN_OVERLAP_S else None


def window_images(stream: list[dict], window: tuple[float, float]) -> tuple[int, float]:
    """Images and seconds of one job's steady interval events that lie wholly inside `window`."""
    inside = [e for e in stream if e["type"] == events.INTERVAL and not e.get("warmup")
              and e["t"] - e["interval_s"] >= window[0] - 1e-6 and e["t"] <= window[1] + 1e-6]
    return sum(e["interval_images"] for e in inside), sum(e["interval_s"] for e in inside)


def window_rate(stream: list[dict], window: tuple[float, float]) -> float | None:
    """Images/s of one job inside `window` (None if no interval lies wholly inside it)."""
    images, seconds = window_images(stream, window)
    return images / seconds if seconds > 0 else None


def gpu_summary(gpu_samples: pd.DataFrame, window: tuple[float, float], streams) -> dict:
    """The monitor's figures over `window`, and the energy per image the given jobs trained in it."""
    figures = summarize(gpu_samples, *window)
    rates = [window_rate(stream, window) for stream in streams]
    images = sum(r for r in rates if r) * (window[1] - window[0])
    figures["energy_per_image_j"] = figures["energy_j"] / images if figures.get("energy_j") and images else None
    return figures


def aggregate(jobs: list[dict], sequential: bool, window: tuple[float, float] | None) -> dict:
    """The run's throughput: how many images per second the whole device trained, and how it was measured."""
    done = [j for j in jobs if j["status"] == "complete" and j["images_per_s"]]
    if not done:
        return {"aggregate_images_per_s": None, "throughput_window": None}
    if sequential:
        total_s = sum(j["steady_s"] for j in done)
        return {"aggregate_images_per_s": sum(j["images_per_s"] * j["steady_s"] for j in done) / total_s,
                "throughput_window": "sequential"}
    overlap = [j["images_per_s_overlap"] for j in jobs]
    if window and all(rate is not None for rate in overlap):
        return {"aggregate_images_per_s": sum(overlap), "throughput_window": "overlap"}
    return {"aggregate_images_per_s": sum(j["images_per_s"] for j in done), "throughput_window": "own"}


def _where(manifest: dict) -> dict:
    """The run's cell, host, GPU and the host CPU seconds its processes used (older manifests carried the whole
    machine description instead of a reference to it)."""
    found = manifest.get("machine") or {}
    if "host" in found:  # a run written before cells: the full description
        gpus = {g["index"]: g for g in found.get("gpus") or []}
        gpu = (manifest.get("spec") or {}).get("gpu", 0)
        found = {"hostname": found["host"].get("hostname"), "gpu_name": gpus.get(gpu, {}).get("name")}
    return {"cell_id": manifest.get("cell_id"), "host": found.get("hostname"), "gpu": manifest.get("gpu"),
            "gpu_name": found.get("gpu_name"), "host_cpu_s": (manifest.get("host_cpu") or {}).get("cpu_s")}


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _epoch_time(times: list[float]) -> float | None:
    """Mean epoch time, leaving out the first epoch (it holds the warm-up) when there are later ones."""
    if not times:
        return None
    later = times[1:] or times
    return sum(later) / len(later)


def _outcome_from_events(last: dict) -> dict:
    if events.END in last:
        return {"status": "complete"}
    if events.ERROR in last:
        return {"status": "failed", "error_kind": last[events.ERROR].get("kind")}
    return {"status": "interrupted", "error": "the run ended before this job reported an outcome"}

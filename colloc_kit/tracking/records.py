"""What a cell becomes in MLflow: one parent run per run folder (a cell's run) and one child run per job, each with its
params, metrics, tags, histories and artifacts, built from the frames `load()` gives (and, where the run folder is at
hand, its manifest, event logs and monitor samples). Nothing here talks to MLflow: `mlflow_log` writes the records.

    >>> cells = records(colloc_kit.load("runs/demo"))                                      # doctest: +SKIP
    >>> cells[0].metrics["aggregate_images_per_s"], cells[0].params["mode"], len(cells[0].children)  # doctest: +SKIP
    (3391.2, 'naive', 2)

Metrics carry `load()`'s names and values: a cell's from `.runs` and `analysis.run_summary` (normalized throughput and
its CI, epoch-time growth, mean GPU activity, energy per image) and its `fairness` (`load().runs`' fairness_index); a
job's from `.jobs` and `analysis.with_baselines` (relative throughput, epoch-time growth, input wait, GPM activity,
energy, steady memory). Histories, where the events are at hand, have for step the whole seconds since the cell's
common start (its first job's release from the start barrier) and for timestamp the event's own time: a job's
`interval/images_per_s`, `interval/loss`, `interval/step_time_s`, `interval/data_wait_share`, `epoch/epoch_time_s`,
`epoch/images_per_s`; a cell's `interval/images_per_s` (its jobs' steady images/s summed, in slices of one interval)
and `gpu/<field>` (the monitor's samples averaged over each interval).
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import pandas as pd

from colloc_kit import events
from colloc_kit.analysis import figures
from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.attribution import SPLIT
from colloc_kit.analysis.results import Results
from colloc_kit.statuses import COMPLETE, FAILED, FAILED_JOBS, INTERRUPTED, RUN_ERROR, TIMED_OUT
from colloc_kit.store.manifest import Manifest
from colloc_kit.store.rundir import RunDir, read_events
from colloc_kit.worker.standin import LABEL as STANDIN_LABEL

__all__ = ["COMPLETE_TAG", "KIND_TAG", "JOB_TAG", "RUN_TAG", "STATUS_TAG", "Point", "Record", "records"]

RUN_TAG, CELL_TAG, KIND_TAG, JOB_TAG = "colloc_kit.run_id", "colloc_kit.cell_id", "colloc_kit.kind", "colloc_kit.job"
STATUS_TAG, EXPERIMENT_TAG = "colloc_kit.status", "colloc_kit.experiment"
COMPLETE_TAG = "colloc_kit.exported"  # set last, once the run and its jobs are whole; a run without it is replaced
MLFLOW_STATUS: dict[str, str] = {COMPLETE: "FINISHED", FAILED_JOBS: "FAILED", RUN_ERROR: "FAILED", FAILED: "FAILED",
                 TIMED_OUT: "FAILED", INTERRUPTED: "KILLED"}
RUN_FIGURES = ("aggregate_images_per_s", "aggregate_images_per_s_ci", "window_s", "n_jobs", "n_complete",
               "host_cpu_s", "host_cpu_util_pct_mean", "host_cpu_steal_pct_mean", "host_cpu_freq_mhz_mean")
SUMMARY_FIGURES = ("normalized_throughput", "normalized_throughput_ci", "epoch_time_growth",
                   "steady_gpu_memory_mb_sum", *analysis.UTILIZATION, "energy_per_image_j",
                   *(f"{m}{s}" for m in SPLIT for s in ("", "_ci")))  # the gain's split: GPU's and host's parts
JOB_FIGURES = ("images_per_s", "images_per_s_ci", "images_per_s_overlap", "relative_throughput", "epoch_time_growth",
               "epoch_time_s", "step_time_s", "input_wait_share", "gpu_idle_share", "steady_s", "held_s", "steps",
               "images", "steady_gpu_memory_mb", "peak_memory_mb", "peak_gpu_allocated_mb", "peak_gpu_reserved_mb",
               "peak_host_rss_mb", "energy_j", "energy_power_integral_j", "avg_power_w", "energy_per_image_j",
               "imports_s", "build_s", "primed_s")
WINDOW_STATS = ("_mean", "_p50", "_p95")  # a job's monitor figures over its window (`<field>_mean`, ...)
GPU_SERIES = ("gpu_util_pct", "sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct", "power_w",
              "mem_used_mb")
SHARED_JOB_PARAMS = ("model", "dataset", "data", "stand_in", "batch_size", "precision", "recipe", "image_size",
                     "device")
MAX_TEXT = 5000  # MLflow keeps params and tags up to a few thousand characters
MAX_LOG_BYTES = 1 << 20  # a job's stderr goes along where it is not empty and below this


class Point(NamedTuple):
    """One value of a metric history: MLflow's key, value, step and timestamp (ms)."""

    key: str
    value: float
    step: int
    timestamp_ms: int


@dataclass
class Record:
    """One MLflow run to write: a cell's run (its jobs in `children`) or a job. `status` is MLflow's (FINISHED,
    FAILED, KILLED); `artifacts` are (file, folder in the run's artifacts or None)."""

    name: str
    experiment: str
    status: str
    start_ms: int | None
    end_ms: int | None
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    histories: list[Point] = field(default_factory=list)
    artifacts: list[tuple[Path, str | None]] = field(default_factory=list)
    children: list["Record"] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        """The kit's run id (the run folder's name): the key that makes an export idempotent."""
        return self.tags[RUN_TAG]


def records(results: Results, samples: bool = False, source: str | None = None,
            experiment: str | None = None) -> list[Record]:
    """One record per run of `results` (its jobs as children). `samples`: also the monitor's Parquet files as
    artifacts; `source`: where the runs came from (a tag); `experiment`: the MLflow experiment for all of them
    (default: each run's own experiment's name)."""
    if results.runs.empty:
        return []
    summary = analysis.run_summary(results).set_index("run_id") if len(results.jobs) else pd.DataFrame()
    jobs = analysis.with_baselines(results.jobs) if len(results.jobs) else results.jobs
    jobs_of: dict[str, list[dict]] = {}
    for job in jobs.to_dict("records"):  # one conversion: a wide frame is slow to convert group by group
        jobs_of.setdefault(job["run_id"], []).append(job)
    samples_of = dict(tuple(results.samples.groupby("run_id", sort=False))) \
        if "run_id" in results.samples else {}
    out = []
    for run in results.runs.to_dict("records"):
        row = summary.loc[run["run_id"]].to_dict() if run["run_id"] in summary.index else {}
        out.append(_cell(run, row, jobs_of.get(run["run_id"], []), samples_of.get(run["run_id"]),
                         samples=samples, source=source, experiment=experiment))
    return out


def _cell(run: dict, summary: dict, jobs: list[dict], gpu_samples: pd.DataFrame | None, samples: bool,
          source: str | None, experiment: str | None) -> Record:
    """The record of one run, its jobs' records as children."""
    folder = _folder(run.get("run_dir"))
    manifest = folder.read_manifest() if folder else None
    streams = {job["job"]: read_events(folder.events_path(job["job"])) for job in jobs} if folder else {}
    start = _common_start(streams, run)
    interval_s = min((j["interval_s"] for j in jobs if _number(j.get("interval_s"))), default=1.0)
    status = str(run["status"])
    tags = {RUN_TAG: run["run_id"], CELL_TAG: run.get("cell_id"), KIND_TAG: "cell", STATUS_TAG: status,
            EXPERIMENT_TAG: run.get("experiment"), "colloc_kit.bound_by": run.get("bound_by"),
            "colloc_kit.flags": run.get("flags"), "colloc_kit.throughput_window": run.get("throughput_window"),
            "colloc_kit.problems": run.get("problems"), "colloc_kit.baseline_note": summary.get("baseline_note"),
            "colloc_kit.baseline": summary.get("baseline"), "colloc_kit.split_note": summary.get("attribution_note"),
            "colloc_kit.source": source, "colloc_kit.run_dir": run.get("run_dir") if folder else None,
            "mlflow.note.content": _note(run, summary, source)}
    metrics = {**_figures(run, RUN_FIGURES), **_figures(summary, SUMMARY_FIGURES)}
    if _number(run.get("fairness_index")):
        metrics["fairness"] = float(run["fairness_index"])
    record = Record(name=f"{run['mode_label']} x{run['copies']} r{run['repeat']}: {summary.get('jobs_label') or ''}",
                    experiment=experiment or str(run.get("experiment") or "colloc-kit"),
                    status=MLFLOW_STATUS.get(status, "KILLED"), start_ms=_ms(run.get("started_at")),
                    end_ms=_ms(run.get("ended_at")), params=_cell_params(run, summary, jobs, manifest, folder),
                    metrics=metrics, tags=_text(tags))
    if folder:
        record.histories = _cell_histories(streams, gpu_samples, start, interval_s)
        record.artifacts = _cell_artifacts(folder, manifest, samples)
    record.children = [_job(job, record, streams.get(job["job"]), start, folder, manifest) for job in jobs]
    return record


def _job(job: dict, cell: Record, stream: list[dict] | None, start: float | None, folder: RunDir | None,
         manifest: Manifest | None) -> Record:
    """A job's record: its params (its spec as run), figures, outcome as tags, histories and logs."""
    params = {"job": job["job"], "group": job.get("group"), "slot": job.get("slot_label"), **_job_values(job),
              "dataset_label": job.get("dataset_label"), "amp": job.get("amp"), "interval_s": job.get("interval_s"),
              **{k: v for k, v in job.items() if k.startswith("slot_") and k != "slot_label"}}
    entry = next((e for e in manifest.jobs if e.job == job["job"]), None) if manifest else None
    cores = entry.outcome.cores if entry and entry.outcome else None
    params["cores"] = ",".join(map(str, cores)) if cores else None
    params.update({k: v for k, v in (entry.spec if entry else {}).items() if k not in params and _scalar(v)})
    metrics = _figures(job, JOB_FIGURES)
    metrics.update(_figures(job, [k for k in job if k.endswith(WINDOW_STATS)]))
    tags = {RUN_TAG: cell.run_id, CELL_TAG: cell.tags.get(CELL_TAG), KIND_TAG: "job", JOB_TAG: job["job"],
            STATUS_TAG: job.get("status"), EXPERIMENT_TAG: cell.tags.get(EXPERIMENT_TAG),
            "colloc_kit.error_kind": job.get("error_kind"), "colloc_kit.error": job.get("error"),
            "colloc_kit.bound_by": job.get("bound_by"), "colloc_kit.mode_problem": job.get("mode_problem"),
            "colloc_kit.baseline_note": job.get("baseline_note")}
    record = Record(name=job["job"], experiment=cell.experiment,
                    status=MLFLOW_STATUS.get(str(job.get("status")), "KILLED"),
                    start_ms=_ms(job.get("started_at")) or cell.start_ms,
                    end_ms=_ms(job.get("ended_at")) or cell.end_ms, params=_params(params), metrics=metrics,
                    tags=_text(tags))
    if folder and stream is not None:
        record.histories = _job_histories(stream, start)
        logs = [folder.events_path(job["job"]), folder.jobs_dir / f"{job['job']}.stderr.log"]
        record.artifacts = [(p, None) for p in logs if p.is_file() and 0 < p.stat().st_size < MAX_LOG_BYTES]
    return record


def _cell_params(run: dict, summary: dict, jobs: list[dict], manifest: Manifest | None,
                 folder: RunDir | None) -> dict[str, str]:
    """A cell's params: mode and options, copies, repeat, placement, its jobs' shared values, the machine."""
    params: dict[str, Any] = {
        "experiment": run.get("experiment"), "mode": run.get("mode"), "mode_label": run.get("mode_label"),
        "copies": run.get("copies"), "repeat": run.get("repeat"), "sequential": run.get("sequential"),
        "alone": run.get("alone"), "n_jobs": run.get("n_jobs"), "jobs": summary.get("jobs_label"),
        "workloads": summary.get("workloads"), "host": run.get("host"), "gpu": run.get("gpu"),
        "gpu_name": run.get("gpu_name")}
    values = [_job_values(job) for job in jobs]
    for key in SHARED_JOB_PARAMS:
        params[key] = " + ".join(dict.fromkeys(str(v[key]) for v in values if v.get(key) is not None)) or None
    if manifest:
        params.update({f"mode.{k}": v for k, v in manifest.mode.options.items()})
        params["placement"] = manifest.placement or "pinned (an older kit's: blocks of at most 4 cores)"
        params["monitor_interval_s"] = manifest.monitor.interval_s
        params.update(_machine(manifest, folder))
    return _params(params)


def _job_values(job: dict) -> dict[str, Any]:
    """What a job trained, as the params name it (also shared by its cell): data, stand-in, precision, ..."""
    amp, label = job.get("amp"), job.get("dataset_label")
    return {"model": job.get("model"), "dataset": job.get("dataset"),
            "data": analysis.data_name(job.get("dataset"), job.get("data_root")),
            "stand_in": STANDIN_LABEL in label if isinstance(label, str) else None,
            "batch_size": job.get("batch_size"), "precision": "fp32" if amp == "off" else amp,
            "recipe": job.get("recipe"), "image_size": job.get("image_size"), "device": job.get("device")}


def _machine(manifest: Manifest, folder: RunDir | None) -> dict[str, Any]:
    """The machine the run's manifest names (its description file, or inline in a run written before cells):
    GPU, driver, CUDA, versions, the kit's commit; nothing where the description cannot be read."""
    ref = manifest.machine
    try:
        described = ref.extra if "host" in ref.extra else (
            json.loads((folder.path / ref.description).read_text()) if folder and ref.description else {})
    except (OSError, ValueError):
        return {}
    cards = described.get("gpus") or []
    card: dict[str, Any] = next((g for g in cards if ref.gpu_uuid and g.get("uuid") == ref.gpu_uuid),
                next((g for g in cards if g.get("index") == manifest.gpu), {}))
    versions = described.get("versions") or {}
    return {"machine.cpu": (described.get("host") or {}).get("cpu"), "machine.gpu": card.get("name"),
            "machine.gpu_memory_mb": card.get("memory_mb"), "machine.driver": card.get("driver"),
            "machine.cuda": card.get("cuda_driver"), **{f"machine.{k}": v for k, v in versions.items()},
            "machine.commit": described.get("git_commit")}


def _cell_histories(streams: dict[str, list[dict]], gpu: pd.DataFrame | None, start: float | None,
                    interval_s: float) -> list[Point]:
    """A cell's series: its jobs' steady images/s summed in slices of one interval (from the first job's end of
    warm-up to the last one's stop), and the GPU's samples averaged per interval from the common start on."""
    points: list[Point] = []
    spans = [span for span in map(figures.steady_span, streams.values()) if span]
    window = figures.Window(min(a for a, _ in spans), max(b for _, b in spans)) if spans else None
    if start is not None and window and window.seconds > 0:
        rates = figures.slice_rates(streams.values(), window, interval_s)
        edges = [window.bounds()[0] + window.seconds * (i + 1) / len(rates) for i in range(len(rates))]
        points += [_point("interval/images_per_s", rate, t, start) for rate, t in zip(rates, edges)]
    if start is not None and gpu is not None and len(gpu):
        after = gpu[gpu["t"] >= start]
        columns = [c for c in GPU_SERIES if c in after and after[c].notna().any()]
        binned = after.groupby(((after["t"] - start) // interval_s).astype(int))[columns].mean()
        for index, row in binned.iterrows():
            t = start + (int(index) + 1) * interval_s
            points += [_point(f"gpu/{c}", row[c], t, start) for c in columns if pd.notna(row[c])]
    return points


def _job_histories(stream: list[dict], start: float | None) -> list[Point]:
    """A job's series from its events: each interval's images/s, loss, step time and input wait; each epoch's time."""
    if start is None:
        return []
    points = []
    for e in stream:
        if e["type"] == events.INTERVAL:
            values = {"interval/images_per_s": e["interval_images"] / e["interval_s"], "interval/loss": e.get("loss"),
                      "interval/step_time_s": e.get("step_time_s"),
                      "interval/data_wait_share": (e.get("data_wait_s") or 0.0) / e["interval_s"]}
        elif e["type"] == events.EPOCH:
            values = {"epoch/epoch_time_s": e.get("epoch_time_s"), "epoch/images_per_s": e.get("images_per_s")}
        else:
            continue
        points += [_point(k, v, e["t"], start) for k, v in values.items() if _number(v)]
    return points


def _cell_artifacts(folder: RunDir, manifest: Manifest | None, samples: bool) -> list[tuple[Path, str | None]]:
    """The manifest and the machine description; the monitor's Parquet files with `samples`."""
    found: list[tuple[Path, str | None]] = [(folder.path / "manifest.json", None)]
    described = manifest.machine.description if manifest else None
    if described and (folder.path / described).is_file():
        found.append(((folder.path / described).resolve(), "machine"))
    if samples:
        found += [(p, "monitor") for p in sorted(folder.monitor_dir.glob("*.parquet"))]
    return found


def _common_start(streams: dict[str, list[dict]], run: dict) -> float | None:
    """When the cell's jobs were released: its first `start` event; the run's start where no job started."""
    starts = [e["t"] for stream in streams.values() for e in stream if e["type"] == events.START]
    return min(starts) if starts else (run.get("started_at") if _number(run.get("started_at")) else None)


def _note(run: dict, summary: dict, source: str | None) -> str:
    """The run's description in MLflow's UI (markdown)."""
    lines = [f"colloc-kit run `{run['run_id']}` of cell `{run.get('cell_id')}` in experiment "
             f"`{run.get('experiment')}`: {summary.get('jobs_label') or 'no jobs'} under {run.get('mode_label')}, "
             f"status {run['status']}.", f"Flags: {run['flags']}." if isinstance(run.get("flags"), str) else "",
             f"From {source}." if source else ""]
    return " ".join(line for line in lines if line)


def _figures(row: dict, names: Iterable[str]) -> dict[str, float]:
    """The finite numbers among `row`'s `names`, as floats."""
    return {name: float(row[name]) for name in names if _number(row.get(name))}


def _params(values: dict[str, Any]) -> dict[str, str]:
    """MLflow params: each value as text (lists joined by +), None and NaN left out."""
    out = {}
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            value = "+".join(map(str, value))
        if _missing(value):
            continue
        out[key] = str(value.item() if hasattr(value, "item") else value)[:MAX_TEXT]
    return out


def _text(tags: dict[str, Any]) -> dict[str, str]:
    """MLflow tags: the values that are text (or numbers), shortened to what MLflow keeps."""
    return {k: str(v)[:MAX_TEXT] for k, v in tags.items() if not _missing(v)}


def _point(key: str, value: float, t: float, start: float) -> Point:
    return Point(key, float(value), int(round(t - start)), int(t * 1000))


def _number(value: Any) -> bool:
    """A finite number (numpy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA."""
    return value is None or (not isinstance(value, (str, dict)) and bool(pd.isna(value)))


def _scalar(value: Any) -> bool:
    return value is not None and isinstance(value, (str, int, float, bool))


def _ms(seconds: Any) -> int | None:
    return int(seconds * 1000) if _number(seconds) else None


def _folder(run_dir: Any) -> RunDir | None:
    """The run's folder where it is at hand (a reference set's runs were exported from folders elsewhere)."""
    return RunDir(run_dir) if isinstance(run_dir, str) and (Path(run_dir) / "manifest.json").is_file() else None

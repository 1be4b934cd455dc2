"""Run an experiment: for each (mode, copies, repeat), prepare the mode, start the jobs, monitor, record.

    >>> import colloc_kit
    >>> results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "steps": 40}],
    ...                          mode="naive", copies=2, out="runs")          # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                        # doctest: +SKIP

Everything is validated before anything starts (jobs, datasets, modes, copy counts); each run's directory is
written before its first job starts and completed on every exit path (see rundir.py).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import events, machine
from .launcher import LaunchItem, Outcome, Wave
from .modes import make_mode
from .progress import Progress
from .results import Results, RunReading, assemble, read_run
from .rundir import RunDir, check_out
from .spec import ExperimentSpec, JobSpec, ModeSpec
from .statuses import COMPLETE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, RUNNING


def run(jobs: Iterable[JobSpec | Mapping[str, Any]], mode: Any = "naive", copies: int | list[int] = 1,
        repeats: int = 1, out: str | Path = "runs", name: str = "experiment", gpu: int = 0,
        time_limit_s: float | None = None, monitor: bool = True, monitor_interval_s: float = 0.15,
        progress: bool | Progress = True) -> Results:
    """Run job groups under one or more modes (`mode` may be a list) at one or more copy counts; return the results.

    `jobs` are JobSpec or dicts of JobSpec fields; `mode` is a name ("naive"), a dict ({"name": "mps",
    "thread_percentage": 50}) or a ModeSpec.
    """
    modes = mode if isinstance(mode, list) else [mode]
    spec = ExperimentSpec(
        jobs=[j if isinstance(j, JobSpec) else JobSpec.from_mapping(j) for j in jobs],
        modes=[ModeSpec.parse(m) for m in modes], copies=copies if isinstance(copies, list) else [copies],
        repeats=repeats, name=name, gpu=gpu, time_limit_s=time_limit_s, monitor=monitor,
        monitor_interval_s=monitor_interval_s)
    return run_spec(spec, out=out, progress=progress)


def run_spec(spec: ExperimentSpec, out: str | Path = "runs", progress: bool | Progress = True) -> Results:
    """Run every (mode, copies, repeat) of `spec`; an interrupt stops at once, keeping what was measured."""
    preflight(spec)
    check_out(out)
    bar = progress if isinstance(progress, Progress) else Progress(total_runs=len(spec.runs()), enabled=progress)
    readings = []
    try:
        with _sigterm_as_interrupt():
            for mode_spec, copies, repeat in spec.runs():
                readings.append(run_once(spec, mode_spec, copies, repeat, Path(out), bar))
    finally:
        bar.close()
    return assemble(readings)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """While runs are under way, SIGTERM (a timeout, a service stop) takes the clean path of Ctrl-C: jobs stopped,
    the mode restored, the run marked interrupted. Only the main thread can install a handler; elsewhere, as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def preflight(spec: ExperimentSpec) -> None:
    """Refuse bad input before anything starts: every job checked, every mode able to place every copy count."""
    from .worker import check_job

    for job in spec.jobs:
        check_job(job)
    for mode_spec in spec.modes:
        probe = make_mode(mode_spec, workdir=Path("."), gpu=spec.gpu, device=spec.device)
        for copies in spec.copies:
            probe.check(copies * len(spec.jobs))


def plan_jobs(spec: ExperimentSpec, copies: int) -> list[tuple[str, int, JobSpec]]:
    """(job id, group index, spec) for every job of one run: each group `copies` times, with distinct seeds."""
    planned = []
    for copy in range(copies):
        for group, job in enumerate(spec.jobs):
            index = len(planned)
            planned.append((f"j{index}-{job.model}", group, job.with_(seed=job.seed + copy)))
    return planned


def run_once(spec: ExperimentSpec, mode_spec: ModeSpec, copies: int, repeat: int, out: Path,
             bar: Progress) -> RunReading:
    """One run: its directory, its mode entered and left, its jobs launched (in waves if the mode is sequential);
    returns the run as `read_run` reads it back."""
    planned = plan_jobs(spec, copies)
    run = RunDir.create(out, spec.name, f"{mode_spec.label}-x{copies}-r{repeat}")
    mode = make_mode(mode_spec, workdir=run.mode_dir, gpu=spec.gpu, device=spec.device)
    manifest = {
        "run_id": run.run_id, "experiment": spec.name, "status": RUNNING, "started_at": events.now(), "ended_at": None,
        "mode": {"name": mode_spec.name, "options": mode_spec.options, "label": mode_spec.label},
        "copies": copies, "repeat": repeat, "sequential": mode.sequential, "spec": spec.to_dict(),
        "machine": machine.describe(), "mode_state": None, "problems": [],
        "monitor": {"enabled": spec.monitor, "interval_s": spec.monitor_interval_s},
        "jobs": [{"job": job_id, "group": group, "spec": job.to_dict(), "slot": None, "outcome": None}
                 for job_id, group, job in planned],
    }
    run.write_manifest(manifest)
    bar.run_started(f"{mode_spec.label} x{copies} r{repeat}", len(planned))
    outcomes: list[Outcome] = []
    status, problems = INTERRUPTED, []
    try:
        with mode:
            slots = mode.slots(len(planned))
            items = [LaunchItem(job_id, job, slot) for (job_id, _, job), slot in zip(planned, slots)]
            for entry, slot in zip(manifest["jobs"], slots):
                entry["slot"] = {"label": slot.label, "info": slot.info}
            run.update_manifest(jobs=manifest["jobs"], mode_state=mode.state())
            with _monitor(spec, run) as watch:
                for wave_items in ([[i] for i in items] if mode.sequential else [items]):
                    wave = Wave(wave_items, run.jobs_dir, spec.time_limit_s, on_event=bar.on_event,
                                on_start=watch)
                    try:
                        wave.run()
                    finally:
                        outcomes += wave.outcomes
            problems = mode.problems()
        run.update_manifest(mode_state=mode.state())  # what leaving the mode did (e.g. MPS shutdown notes)
        status = COMPLETE if all(o.status == COMPLETE for o in outcomes) else FAILED_JOBS
    except Exception as exc:  # a KeyboardInterrupt keeps the status INTERRUPTED set above
        status, problems = RUN_ERROR, problems + [f"{type(exc).__name__}: {exc}"]
        raise
    finally:
        _finish(run, manifest, outcomes, status, problems)
        reading = read_run(run)
        jobs, _, summary, _ = reading
        _write_jobs_csv(run, jobs)
        bar.run_finished(f"{summary['n_complete']}/{summary['n_jobs']} complete, "
                         f"{summary['aggregate_images_per_s'] or 0:,.0f} img/s")
    return reading


def _finish(run: RunDir, manifest: dict, outcomes: list[Outcome], status: str, problems: list[str]) -> None:
    """Complete the manifest: every job's outcome (jobs never started are marked so), problems, status."""
    by_id = {o.job_id: o for o in outcomes}
    for entry in manifest["jobs"]:
        outcome = by_id.get(entry["job"])
        started = run.events_path(entry["job"]).exists()  # no outcome but started: a second interrupt cut the wave
        entry["outcome"] = outcome.to_dict() if outcome else {
            "job_id": entry["job"], "status": INTERRUPTED,
            "error": "stopped by an interrupt" if started else "not started: the run stopped before its turn"}
        if problems and entry["outcome"]["status"] != COMPLETE:
            entry["outcome"]["mode_problem"] = "; ".join(problems)
    run.update_manifest(jobs=manifest["jobs"], status=status, problems=problems, ended_at=events.now())


def _write_jobs_csv(run: RunDir, rows: list[dict]) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_csv(run.path / "jobs.csv", index=False)


@contextlib.contextmanager
def _monitor(spec: ExperimentSpec, run: RunDir):
    """The monitor over the whole run; yields the callback that tells it which pids belong to which job."""
    pids: dict[int, str] = {}
    if not spec.monitor:
        yield pids.update
        return
    from .monitor import Monitor

    gpu = spec.gpu if spec.device == "cuda" else None
    with Monitor(run.monitor_dir, gpu=gpu, interval_s=spec.monitor_interval_s, job_pids=lambda: dict(pids)):
        yield pids.update

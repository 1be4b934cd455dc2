"""One cell run: its run directory, its mode entered and left on its GPU, its jobs launched behind one barrier (in
waves where the mode is sequential), the monitor around them, and its manifest completed on every exit path.

This is the write side: a cell returns its `Manifest`; reading the run back (`report.py`) is a separate step.

    >>> placement = Placement(gpu=0, gpu_uuid=None, gpu_name=None, hostname="here", machine_file=Path("m.json"))
    >>> run = RunDir.create("runs", spec.name, cell.label)                                 # doctest: +SKIP
    >>> manifest = run_cell(spec, cell, placement, run, Progress(total_runs=1))            # doctest: +SKIP
    >>> manifest.status                                                                     # doctest: +SKIP
    <Status.COMPLETE: 'complete'>
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from colloc_kit import events
from colloc_kit.gpu.mps_detect import one_scan
from colloc_kit.modes import Slot, make_mode
from colloc_kit.paths import check_folder
from colloc_kit.serving import SERVE
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.launcher import LaunchItem, Wave
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.warm import Kept, Launch, jobs_cpu_s, run_between
from colloc_kit.spec import ExperimentSpec, JobSpec
from colloc_kit.statuses import COMPLETE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, Status
from colloc_kit.store.manifest import (
    HostCpu, JobEntry, JobOutcome, MachineRef, Manifest, ModeRecord, MonitorSettings, SlotRecord, WarmWindow,
)
from colloc_kit.store.rundir import RunDir, this_runner
from colloc_kit.worker.zygote import Zygote

__all__ = ["Placement", "plan_jobs", "preflight", "run_cell", "current_slurm_job"]


@dataclass(frozen=True)
class Placement:
    """Where a cell runs: the GPU index the mode and monitor use, its UUID and name (None on the CPU), the host, and
    the machine description the manifest refers to."""

    gpu: int
    gpu_uuid: str | None
    gpu_name: str | None
    hostname: str
    machine_file: Path

    @classmethod
    def on(cls, machine_info: dict, machine_file: Path, gpu: int, device: str) -> "Placement":
        """GPU `gpu` of the machine `machine_info` describes (stored in `machine_file`); no card for CPU jobs."""
        gpus = machine_info["gpus"] if device == "cuda" else []
        card: dict[str, Any] = next((g for g in gpus if g["index"] == gpu), {})
        return cls(gpu, card.get("uuid"), card.get("name"), machine_info["host"]["hostname"], Path(machine_file))


def preflight(spec: ExperimentSpec, gpus: Iterable[int] | None = None, modes: bool = True) -> None:
    """Refuse bad input before anything starts: every job checked, every mode able to place every copy count on
    every GPU the cells may land on."""
    from colloc_kit.worker import (  # noqa: PLC0415 - lazy: the worker's checks import its model and data tables
        check_job,
    )

    for job in spec.jobs:
        if job.data_root is not None and job.dataset != "synthetic":
            check_folder(job.data_root, "data folder (--data-root)", exists=True)
        check_job(job)
    with one_scan():  # the machine's MPS daemons read once for every mode on every GPU
        for gpu in (gpus or [spec.gpu]) if modes else []:
            for mode_spec in spec.modes:
                probe = make_mode(mode_spec, workdir=Path("."), gpu=gpu, device=spec.device)
                for copies in spec.copies:
                    probe.check(copies * len(spec.jobs))


def plan_jobs(spec: ExperimentSpec, copies: int) -> list[tuple[str, int, JobSpec]]:
    """(job id, group index, spec) for every job of one run: each training group `copies` times, with distinct
    seeds; an inference group (`role: serve`) once, whatever the copies (they count the training beside it).

    >>> [job_id for job_id, _, _ in plan_jobs(ExperimentSpec(jobs=[JobSpec(model="smallcnn")]), 2)]
    ['j0-smallcnn', 'j1-smallcnn']
    """
    planned: list[tuple[str, int, JobSpec]] = []
    for copy in range(copies):
        for group, job in enumerate(spec.jobs):
            if job.role == SERVE and copy:
                continue
            planned.append((f"j{len(planned)}-{job.model}", group, job.with_(seed=job.seed + copy)))
    return planned


def current_slurm_job() -> str | None:
    """The Slurm job this process runs in ("<array job>_<task>" for an array task, as submitit names it), if any."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def run_cell(spec: ExperimentSpec, cell: Cell, placement: Placement, run: RunDir, bar: Progress,
             zygote: Zygote | None = None, kept: Kept | None = None) -> Manifest:
    """One cell into the fresh run directory `run` (see the module); returns its manifest as written at the end. An
    interrupt or an error of the kit is recorded (interrupted, error) and propagates. With a `zygote`, the jobs are
    forked from it. A baseline's cell runs its own jobs (`Cell.spec_of`). With `kept` (a lane's, for a spec with
    `warm_repeats`: `pipeline.warm`), the cell measures the next window of the launch kept from its last repeat where
    there is one (or of its cell's launch, its feed swapped: `Cell.feed_from`), and keeps its own launch after it (a
    sequential mode's several jobs always start afresh)."""
    spec = cell.spec_of(spec)
    planned = plan_jobs(spec, cell.copies)
    launch = kept.take(cell.series, cell.feed_from) if kept is not None else None
    if launch is not None:
        assert kept is not None  # (a launch is only taken from one)
        return _warm_window(spec, cell, placement, run, bar, planned, launch, kept)
    mode = make_mode(cell.mode, workdir=run.mode_dir, gpu=placement.gpu, device=spec.device)
    keep = kept is not None and not (mode.sequential and len(planned) > 1)
    manifest = _started(spec, cell, placement, run, planned, alone=mode.alone(len(planned)),
                        sequential=mode.sequential, warm=WarmWindow(run.run_id) if keep else None)
    run.write_manifest(manifest)
    bar.run_started(f"{cell.mode.label} x{cell.copies} r{cell.repeat}", len(planned))
    outcomes: list[JobOutcome] = []
    status, problems, cpu_s = INTERRUPTED, [], None
    cpu_before = _children_cpu_s(zygote)
    lost_before = zygote.lost if zygote else None
    try:
        with contextlib.ExitStack() as entered:  # the mode: left at its end, unless a kept launch holds it
            entered.enter_context(mode)
            mode_slots = mode.slots(len(planned))
            slots = [SlotRecord(slot.label, slot.info) for slot in mode_slots]
            manifest = replace(manifest, mode_state=mode.state(), jobs=[
                replace(entry, slot=slot) for entry, slot in zip(manifest.jobs, slots)])
            run.write_manifest(manifest)
            with _monitor(spec, run, placement.gpu, bar.gpu_sample) as watch:
                for wave_items in _waves(planned, mode_slots, mode.sequential):
                    wave = Wave(wave_items, run.jobs_dir, spec.time_limit_s, on_event=bar.on_event,
                                on_start=watch, zygote=zygote, placement=spec.placement, keep=keep)
                    try:
                        wave.run()
                    finally:
                        outcomes += wave.outcomes
            problems = mode.problems() + ([f"{zygote.lost} during this run: its jobs are recorded from their own "
                                          "events; later jobs start as fresh processes"]
                                         if zygote and zygote.lost and not lost_before else [])
            if keep and wave.kept:  # its jobs alive and primed, its mode entered: for the next repeat
                assert kept is not None  # (keep needs one)
                cpu_s = round(jobs_cpu_s(wave.pids()), 3)
                kept.keep(Launch(cell.series, mode, entered.pop_all(), wave, slots, run.run_id))
        manifest = replace(manifest, mode_state=mode.state())  # what leaving the mode did (e.g. MPS shutdown notes)
        run.write_manifest(manifest)
        status = COMPLETE if all(o.status == COMPLETE for o in outcomes) else FAILED_JOBS
    except Exception as exc:  # a KeyboardInterrupt keeps the status INTERRUPTED set above
        status, problems = RUN_ERROR, problems + [f"{type(exc).__name__}: {exc}"]
        raise
    finally:
        cpu_s = round(_children_cpu_s(zygote) - cpu_before, 3) if cpu_s is None else cpu_s
        manifest = _finished(run, manifest, outcomes, status, problems, cpu_s)
        run.write_manifest(manifest)
    return manifest


def _waves(planned: list[tuple[str, int, JobSpec]], slots: list[Slot], sequential: bool) -> list[list[LaunchItem]]:
    """The run's jobs in their slots, as the waves that start together: one each where the mode is sequential."""
    items = [LaunchItem(job_id, job, slot) for (job_id, _, job), slot in zip(planned, slots)]
    return [[item] for item in items] if sequential else [items]


def _warm_window(spec: ExperimentSpec, cell: Cell, placement: Placement, run: RunDir, bar: Progress,
                 planned: list[tuple[str, int, JobSpec]], launch: Launch, kept: Kept) -> Manifest:
    """A warm repeat: the next window of `launch` (its jobs paused after its last window) into `run`, on the feed of
    `cell`'s jobs where the launch served another series (a feed swap: the window warms up again); the launch kept
    again after a complete window, else closed (jobs stopped, mode left). A `warm.between_windows` call runs first,
    the jobs held."""
    run_between(launch.windows)
    swap = launch.series != cell.series
    mode, warm = launch.mode, WarmWindow(launch.first_run, launch.windows, warmup_steps=None if swap else 0,
                                         feed_from=(launch.last_run or launch.first_run) if swap else None)
    manifest = _started(spec, cell, placement, run, planned, alone=mode.alone(len(planned)),
                        sequential=mode.sequential, warm=warm)
    manifest = replace(manifest, mode_state=mode.state(), jobs=[
        replace(entry, slot=slot) for entry, slot in zip(manifest.jobs, launch.slots)])
    run.write_manifest(manifest)
    bar.run_started(f"{cell.mode.label} x{cell.copies} r{cell.repeat} ({'fed anew' if swap else 'warm'})",
                    len(planned))
    launch.series = cell.series
    status, problems, cpu_s = INTERRUPTED, [], None
    cpu_before = jobs_cpu_s(launch.wave.pids())
    try:
        with _monitor(spec, run, placement.gpu, bar.gpu_sample) as watch:
            watch(launch.wave.pids())
            launch.wave.again(run.jobs_dir, [job for _, _, job in planned] if swap else None)
        manifest = replace(manifest, warm=replace(warm, held_before_s=round(launch.wave.held_before_s, 3)))
        problems = mode.problems()
        status = COMPLETE if all(o.status == COMPLETE for o in launch.wave.outcomes) else FAILED_JOBS
        if launch.wave.kept:
            cpu_s = round(jobs_cpu_s(launch.wave.pids()) - cpu_before, 3)
            launch.windows, launch.last_run = launch.windows + 1, run.run_id
            kept.keep(launch)
    except Exception as exc:  # a KeyboardInterrupt keeps the status INTERRUPTED set above
        status, problems = RUN_ERROR, problems + [f"{type(exc).__name__}: {exc}"]
        raise
    finally:
        if kept.launch is not launch:
            launch.close()
            manifest = replace(manifest, mode_state=mode.state())
        manifest = _finished(run, manifest, launch.wave.outcomes, status, problems, cpu_s)
        run.write_manifest(manifest)
    return manifest


def _started(spec: ExperimentSpec, cell: Cell, placement: Placement, run: RunDir,
             planned: list[tuple[str, int, JobSpec]], alone: bool, sequential: bool,
             warm: WarmWindow | None = None) -> Manifest:
    """The manifest written before the first job starts (status running)."""
    cuda, runner = spec.device == "cuda", this_runner()
    return Manifest(
        run_id=run.run_id, experiment=spec.name, cell_id=cell.cell_id, started_at=events.now(),
        mode=ModeRecord(cell.mode.name, cell.mode.options, cell.mode.label),
        copies=cell.copies, repeat=cell.repeat, sequential=sequential, alone=alone, placement=spec.placement,
        spec=spec.to_dict(),
        gpu=placement.gpu if cuda or spec.gpus is not None else None,  # CPU jobs: the dispatcher's GPU slot
        runner_pid=runner[0], runner_started_at=runner[1], slurm_job_id=current_slurm_job(),
        machine=MachineRef(hostname=placement.hostname, gpu_name=placement.gpu_name, gpu_uuid=placement.gpu_uuid,
                           description=os.path.relpath(placement.machine_file, run.path)),
        host_cpu=HostCpu(cores=sorted(os.sched_getaffinity(0))),
        monitor=MonitorSettings(enabled=spec.monitor, interval_s=spec.monitor_interval_s), warm=warm,
        jobs=[JobEntry(job_id, group=group, spec=job.to_dict()) for job_id, group, job in planned])


def _finished(run: RunDir, manifest: Manifest, outcomes: list[JobOutcome], status: Status, problems: list[str],
              cpu_s: float | None) -> Manifest:
    """The manifest completed: every job's outcome (jobs never started are marked so), problems, status, the host
    CPU seconds its jobs used, the end time."""
    by_id = {o.job_id: o for o in outcomes}
    jobs = []
    for entry in manifest.jobs:
        started = run.events_path(entry.job).exists()  # no outcome but started: a second interrupt cut the wave
        outcome = by_id.get(entry.job) or JobOutcome(
            entry.job, INTERRUPTED,
            error="stopped by an interrupt" if started else "not started: the run stopped before its turn")
        if problems and outcome.status != COMPLETE:
            outcome = replace(outcome, mode_problem="; ".join(problems))
        jobs.append(replace(entry, outcome=outcome))
    return replace(manifest, jobs=jobs, status=status, problems=problems, ended_at=events.now(),
                   host_cpu=replace(manifest.host_cpu, cpu_s=cpu_s))


def _children_cpu_s(zygote: Zygote | None = None) -> float:
    """User + system CPU seconds of this process's finished children (the workers and their loader processes), and
    of the workers `zygote` forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + (zygote.children_cpu_s if zygote else 0.0)


@contextlib.contextmanager
def _monitor(spec: ExperimentSpec, run: RunDir, gpu: int,
             on_gpu_sample: Callable[[Any], None] | None = None) -> Iterator[Callable[[dict[int, str]], None]]:
    """The monitor of GPU `gpu` over the whole run (each sample also to `on_gpu_sample`, a live view); yields the
    callback that tells it which pids belong to which job."""
    pids: dict[int, str] = {}
    if not spec.monitor:
        yield pids.update
        return
    from colloc_kit.monitor import Monitor  # noqa: PLC0415 - lazy: pyarrow and NVML load only where a run is monitored

    with Monitor(run.monitor_dir, gpu=gpu if spec.device == "cuda" else None, interval_s=spec.monitor_interval_s,
                 job_pids=lambda: dict(pids), on_gpu_sample=on_gpu_sample):
        yield pids.update

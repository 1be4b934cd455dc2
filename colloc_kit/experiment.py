"""Run an experiment: its cells (mode x copies x repeat), each preparing its mode, starting its jobs, monitoring,
recording.

    >>> import colloc_kit
    >>> results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "steps": 40}],
    ...                          mode="naive", copies=2, out="runs")          # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                        # doctest: +SKIP

Everything is validated before anything starts (jobs, datasets, modes, copy counts, GPUs); each run's directory is
written before its first job starts and completed on every exit path (see rundir.py). The experiment folder
`out/<name>/` knows its cells (cells.py): the same command into the same folder runs only the cells not complete
there, so a long matrix resumes across sessions. Cells run one after another on one GPU, side by side on several
(`gpus=`, dispatch.py, one process per cell), or as Slurm array tasks (`slurm=`, slurm.py); all three run a cell
through `run_cell`.

    out/<name>/specs/<fingerprint>.json    the spec as run (cell processes and Slurm tasks read it)
    out/<name>/machines/<host>-<time>.json the machine, described once per experiment and host
    out/<name>/<run_id>/                   one run directory per cell run (its manifest names its cell and GPU)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import events, machine
from .errors import BrokenRun
from .cells import Cell, cell_states, cells
from .launcher import LaunchItem, Wave
from .manifest import HostCpu, JobEntry, JobOutcome, MachineRef, Manifest, ModeRecord, MonitorSettings, SlotRecord
from .modes import make_mode
from .progress import Progress
from .results import Results, RunReading, assemble, combine, read_run
from .rundir import RunDir, check_out, safe_name
from .spec import ExperimentSpec, JobSpec, ModeSpec
from .statuses import COMPLETE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, RUNNING, Status
from .zygote import Zygote

SPECS_DIR, MACHINES_DIR = "specs", "machines"
EXIT_ERROR = 3  # a cell process whose run raised (the error is in its manifest and on its stderr)


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
        card = next((g for g in machine_info["gpus"] if g["index"] == gpu), {}) if device == "cuda" else {}
        return cls(gpu, card.get("uuid"), card.get("name"), machine_info["host"]["hostname"], Path(machine_file))


def run(jobs: Iterable[JobSpec | Mapping[str, Any]], mode: Any = "naive", copies: int | list[int] = 1,
        repeats: int = 1, out: str | Path = "runs", name: str = "experiment", gpu: int = 0,
        gpus: list[int] | str | None = None, slurm: dict | None = None,
        time_limit_s: float | None = None, monitor: bool = True, monitor_interval_s: float = 0.15,
        progress: bool | Progress = True) -> Results:
    """Run job groups under one or more modes (`mode` may be a list) at one or more copy counts; return the results.

    `jobs` are JobSpec or dicts of JobSpec fields; `mode` is a name ("naive"), a dict ({"name": "mps",
    "thread_percentage": 50}) or a ModeSpec. `gpus=[0, 1]` (or "all") spreads the cells over those GPUs;
    `slurm={"partition": "gpu"}` submits them to Slurm instead (see slurm.py).
    """
    modes = mode if isinstance(mode, list) else [mode]
    spec = ExperimentSpec(
        jobs=[j if isinstance(j, JobSpec) else JobSpec.from_mapping(j) for j in jobs],
        modes=[ModeSpec.parse(m) for m in modes], copies=copies if isinstance(copies, list) else [copies],
        repeats=repeats, name=name, gpu=gpu, time_limit_s=time_limit_s, monitor=monitor,
        monitor_interval_s=monitor_interval_s, gpus=gpus, slurm=slurm)
    return run_spec(spec, out=out, progress=progress)


def sweep(jobs: Iterable[JobSpec | Mapping[str, Any]], modes: Iterable[Any], copies: int | list[int] = 1,
          baseline: Any = "exclusive", separately: bool = True, **options: Any) -> Results:
    """The notebooks' pattern in one call: each job group alone under `baseline` (one copy), then under every mode
    at its copy counts, all in one experiment folder; one Results of all of it, baselines included, ready for
    `analysis.summarize`.

    `modes`: names, dicts or ModeSpecs as `run` takes them; a pair (mode, copies) gives a mode its own copy counts
    (an MPS partition layout of three: 3). `separately` (the default) measures each job group on its own, N copies
    of one model at a time against its own baseline; False runs the groups together (a mixed workload).
    `baseline=None` runs no baseline. `options`: the rest of `run`'s arguments (repeats, out, name, time_limit_s, ...).

    >>> results = sweep([{"model": "resnet18"}, {"model": "resnet50"}], ["naive", ({"name": "mps",  # doctest: +SKIP
    ...                 "partitions": ["3g", "3g"]}, 2)], copies=[1, 2, 4], out="runs", name="study")
    >>> analysis.summarize(results)[["mode_label", "copies", "normalized_throughput_mean"]]     # doctest: +SKIP
    """
    groups = [[job] for job in jobs] if separately else [list(jobs)]
    shared = [m for m in modes if not isinstance(m, tuple)]  # one run call: their repeats interleave (A B A B)
    own = [m for m in modes if isinstance(m, tuple)]
    parts = []
    for group in groups:
        if baseline is not None:
            parts.append(run(group, mode=baseline, copies=1, **options))
        if shared:
            parts.append(run(group, mode=shared, copies=copies, **options))
        parts += [run(group, mode=mode, copies=counts, **options) for mode, counts in own]
    return combine(parts)


def run_spec(spec: ExperimentSpec, out: str | Path = "runs", progress: bool | Progress = True) -> Results:
    """Run every cell of `spec` not yet complete under out/<name>/ (saying which were skipped) and return the
    results of all its cells; an interrupt stops at once, keeping what was measured. With `spec.slurm` the
    missing cells are submitted and the results of those already complete returned."""
    from . import slurm

    exp_dir = Path(out) / safe_name(spec.name)
    if spec.slurm is not None:
        preflight(spec, modes=False)  # the modes are checked on the node that runs them
        slurm.require_submitter()
    else:
        machine_info = machine.describe()
        gpus = ([g["index"] for g in machine.chosen_gpus(spec.gpus, machine_info["gpus"], machine_info["gpu_reason"])]
                if spec.gpus is not None else [spec.gpu])
        preflight(spec, gpus=gpus)
    check_out(out)
    all_cells = cells(spec)
    states = cell_states(exp_dir)
    done, running = ([c for c in all_cells if c.cell_id in states and states[c.cell_id].status == status]
                     for status in (COMPLETE, RUNNING))
    in_slurm = slurm.queued_cells(exp_dir) if spec.slurm is not None else set()
    todo = [c for c in all_cells if c not in done and c not in running and c.cell_id not in in_slurm]
    _say_skipped(exp_dir, done, "already complete")
    _say_skipped(exp_dir, running, "being run by another process")
    _say_skipped(exp_dir, [c for c in all_cells if c.cell_id in in_slurm and c not in running], "queued in Slurm")
    spec_file = _write_json(exp_dir / SPECS_DIR / f"{spec_fingerprint(spec)}.json", spec.to_dict())
    readings: dict[str, RunReading] = {}
    if spec.slurm is not None:
        slurm.submit(spec, spec_file, todo, exp_dir)
    elif todo:
        readings = _run_here(spec, spec_file, todo, gpus, machine_info, Path(out), progress)
    return _results(all_cells, readings, cell_states(exp_dir))


def _results(all_cells: list[Cell], readings: dict[str, RunReading], states: dict) -> Results:
    """The results of every cell that has a run, in cell order: read as it ended here, else from its folder (a run
    that cannot be read is named in `.broken`, as `load()` does)."""
    found, broken = [], {}
    for cell in all_cells:
        if cell.cell_id in readings:
            found.append(readings[cell.cell_id])
        elif cell.cell_id in states:
            try:
                found.append(read_run(states[cell.cell_id].run))
            except (OSError, ValueError, BrokenRun) as exc:  # ValueError: JSON, Unicode and Parquet errors
                broken[str(states[cell.cell_id].run.path)] = f"{type(exc).__name__}: {exc}"
    results = assemble(found)
    results.broken = broken
    return results


def _run_here(spec: ExperimentSpec, spec_file: Path, todo: list[Cell], gpus: list[int], machine_info: dict,
              out: Path, progress: bool | Progress) -> dict[str, RunReading]:
    """Run `todo` on this machine: one after another in this process on one GPU, or dispatched over several (the
    cells' readings then come from their folders). The machine description is stored once, for all of them."""
    machine_file = _write_json(out / safe_name(spec.name) / MACHINES_DIR /
                               f"{safe_name(machine_info['host']['hostname'])}-{time.strftime('%Y%m%d-%H%M%S')}.json",
                               machine_info)
    placements = [Placement.on(machine_info, machine_file, gpu, spec.device) for gpu in gpus]
    readings: dict[str, RunReading] = {}
    with _sigterm_as_interrupt():
        if len(placements) > 1:
            from .dispatch import dispatch

            dispatch(spec_file, todo, placements, out, bool(progress))
            return readings
        bar = progress if isinstance(progress, Progress) else Progress(total_runs=len(todo), enabled=progress)
        try:
            # one process imports torch for every run's workers, while the first cell sets up (zygote.py)
            with Zygote.for_experiment(job.model for job in spec.jobs) as zygote:
                for cell in todo:
                    readings[cell.cell_id] = run_cell(spec, cell, placements[0], out, bar, zygote)
        finally:
            bar.close()
    return readings


def spec_fingerprint(spec: ExperimentSpec) -> str:
    """Ten hex digits naming the whole spec (its spec file in the experiment folder)."""
    text = json.dumps(spec.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _say_skipped(exp_dir: Path, skipped: list[Cell], why: str) -> None:
    if skipped:
        print(f"colloc-kit: {len(skipped)} cell(s) {why} in {exp_dir}, not run again: "
              + ", ".join(c.label for c in skipped), file=sys.stderr)


def _write_json(path: Path, data: dict) -> Path:
    """Write atomically (temp file + rename): a reader, or a Slurm task on another node, never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
    return path


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


def preflight(spec: ExperimentSpec, gpus: Iterable[int] | None = None, modes: bool = True) -> None:
    """Refuse bad input before anything starts: every job checked, every mode able to place every copy count on
    every GPU the cells may land on."""
    from .worker import check_job

    for job in spec.jobs:
        check_job(job)
    for gpu in (gpus or [spec.gpu]) if modes else []:
        for mode_spec in spec.modes:
            probe = make_mode(mode_spec, workdir=Path("."), gpu=gpu, device=spec.device)
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


def run_cell(spec: ExperimentSpec, cell: Cell, placement: Placement, out: Path, bar: Progress,
             zygote: Zygote | None = None) -> RunReading:
    """One cell: its run directory, its mode entered and left on the placement's GPU, its jobs launched (in waves if
    the mode is sequential; forked from `zygote` if given), its host CPU use recorded; returns the run as `read_run`
    reads it back."""
    planned = plan_jobs(spec, cell.copies)
    mode_spec = cell.mode
    run = RunDir.create(out, spec.name, cell.label)
    mode = make_mode(mode_spec, workdir=run.mode_dir, gpu=placement.gpu, device=spec.device)
    cuda = spec.device == "cuda"
    manifest = Manifest(
        run_id=run.run_id, experiment=spec.name, cell_id=cell.cell_id, started_at=events.now(),
        mode=ModeRecord(mode_spec.name, mode_spec.options, mode_spec.label),
        copies=cell.copies, repeat=cell.repeat, sequential=mode.sequential, spec=spec.to_dict(),
        gpu=placement.gpu if cuda or spec.gpus is not None else None,  # CPU jobs: the dispatcher's GPU slot
        runner_pid=os.getpid(), slurm_job_id=slurm_job_id(),
        machine=MachineRef(hostname=placement.hostname, gpu_name=placement.gpu_name, gpu_uuid=placement.gpu_uuid,
                           description=os.path.relpath(placement.machine_file, run.path)),
        host_cpu=HostCpu(cores=sorted(os.sched_getaffinity(0))),
        monitor=MonitorSettings(enabled=spec.monitor, interval_s=spec.monitor_interval_s),
        jobs=[JobEntry(job_id, group=group, spec=job.to_dict()) for job_id, group, job in planned])
    run.write_manifest(manifest)
    bar.run_started(f"{mode_spec.label} x{cell.copies} r{cell.repeat}", len(planned))
    outcomes: list[JobOutcome] = []
    status, problems = INTERRUPTED, []
    cpu_before = _children_cpu_s(zygote)
    try:
        with mode:
            slots = mode.slots(len(planned))
            items = [LaunchItem(job_id, job, slot) for (job_id, _, job), slot in zip(planned, slots)]
            manifest = replace(manifest, mode_state=mode.state(), jobs=[
                replace(entry, slot=SlotRecord(slot.label, slot.info)) for entry, slot in zip(manifest.jobs, slots)])
            run.write_manifest(manifest)
            with _monitor(spec, run, placement.gpu, bar.gpu_sample) as watch:
                for wave_items in ([[i] for i in items] if mode.sequential else [items]):
                    wave = Wave(wave_items, run.jobs_dir, spec.time_limit_s, on_event=bar.on_event,
                                on_start=watch, zygote=zygote)
                    try:
                        wave.run()
                    finally:
                        outcomes += wave.outcomes
            problems = mode.problems()
        manifest = replace(manifest, mode_state=mode.state())  # what leaving the mode did (e.g. MPS shutdown notes)
        run.write_manifest(manifest)
        status = COMPLETE if all(o.status == COMPLETE for o in outcomes) else FAILED_JOBS
    except Exception as exc:  # a KeyboardInterrupt keeps the status INTERRUPTED set above
        status, problems = RUN_ERROR, problems + [f"{type(exc).__name__}: {exc}"]
        raise
    finally:
        cpu_s = round(_children_cpu_s(zygote) - cpu_before, 3)
        run.write_manifest(_finished(run, manifest, outcomes, status, problems, cpu_s))
        reading = read_run(run)
        summary = reading.summary
        _write_jobs_csv(run, reading.jobs)
        bar.run_finished(f"{summary['n_complete']}/{summary['n_jobs']} complete, "
                         f"{summary['aggregate_images_per_s'] or 0:,.0f} img/s")
    return reading


def run_cell_task(spec_file: str, cell_id: str, out: str) -> str:
    """A Slurm array task (slurm.py submits it): describe this node, run one cell on the GPU Slurm gave the task
    (`_visible_gpu`: NVML ignores CUDA_VISIBLE_DEVICES, so the kit finds that card's NVML index); returns the run's
    status."""
    spec = ExperimentSpec.from_mapping(json.loads(Path(spec_file).read_text()))
    cell = next(c for c in cells(spec) if c.cell_id == cell_id)
    machine_info = machine.describe()
    exp_dir = Path(out) / safe_name(spec.name)
    machine_file = _write_json(exp_dir / MACHINES_DIR / f"{safe_name(machine_info['host']['hostname'])}-"
                               f"{safe_name(slurm_job_id() or str(os.getpid()))}.json", machine_info)
    gpu = _visible_gpu(machine_info, spec.gpu) if spec.device == "cuda" else spec.gpu
    preflight(spec, gpus=[gpu])
    with _sigterm_as_interrupt():
        reading = run_cell(spec, cell, Placement.on(machine_info, machine_file, gpu, spec.device), Path(out),
                           Progress(total_runs=1, enabled=False))
    return reading.summary["status"]


def slurm_job_id() -> str | None:
    """The Slurm job this process runs in ("<array job>_<task>" for an array task, as submitit names it), if any."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def _visible_gpu(machine_info: dict, default: int) -> int:
    """The NVML index of the task's GPU: Slurm's global GPU id (SLURM_STEP_GPUS / SLURM_JOB_GPUS, not renumbered by
    device cgroups), else the first of CUDA_VISIBLE_DEVICES (an index or a UUID), else `default`."""
    named = (os.environ.get("SLURM_STEP_GPUS") or os.environ.get("SLURM_JOB_GPUS")
             or os.environ.get("CUDA_VISIBLE_DEVICES") or "")
    first = named.split(",")[0].strip()
    if first.isdigit():
        return int(first)
    return next((g["index"] for g in machine_info["gpus"] if g["uuid"] == first), default)


def _children_cpu_s(zygote: Zygote | None = None) -> float:
    """User + system CPU seconds of this process's finished children (the workers and their loader processes), and
    of the workers `zygote` forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + (zygote.children_cpu_s if zygote else 0.0)


def cell_main(argv: list[str] | None = None) -> int:
    """`python -m colloc_kit.experiment SPEC_FILE CELL_ID OUT --gpu N --machine-file F`: one cell in its own process,
    its progress as text lines on stdout (the dispatcher's GPU line). Exit 0 complete, 1 failed jobs, 130 interrupted,
    3 an error (on stderr and in the manifest)."""
    parser = argparse.ArgumentParser(prog="python -m colloc_kit.experiment", description=cell_main.__doc__)
    parser.add_argument("spec_file")
    parser.add_argument("cell_id")
    parser.add_argument("out")
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--machine-file", required=True)
    args = parser.parse_args(argv)
    spec = ExperimentSpec.from_mapping(json.loads(Path(args.spec_file).read_text()))
    cell = next(c for c in cells(spec) if c.cell_id == args.cell_id)
    placement = Placement.on(json.loads(Path(args.machine_file).read_text()), Path(args.machine_file), args.gpu,
                             spec.device)
    bar = Progress(total_runs=1, report=lambda text: print(text, flush=True))
    try:
        with _sigterm_as_interrupt():
            status = run_cell(spec, cell, placement, Path(args.out), bar)[2]["status"]
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        print(f"colloc-kit: cell {cell.label} on GPU {args.gpu}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0 if status == COMPLETE else 1


def _finished(run: RunDir, manifest: Manifest, outcomes: list[JobOutcome], status: Status, problems: list[str],
              cpu_s: float) -> Manifest:
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


def _write_jobs_csv(run: RunDir, rows: list[dict]) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_csv(run.path / "jobs.csv", index=False)


@contextlib.contextmanager
def _monitor(spec: ExperimentSpec, run: RunDir, gpu: int, on_gpu_sample=None):
    """The monitor of GPU `gpu` over the whole run (each sample also to `on_gpu_sample`, a live view); yields the
    callback that tells it which pids belong to which job."""
    pids: dict[int, str] = {}
    if not spec.monitor:
        yield pids.update
        return
    from .monitor import Monitor

    with Monitor(run.monitor_dir, gpu=gpu if spec.device == "cuda" else None, interval_s=spec.monitor_interval_s,
                 job_pids=lambda: dict(pids), on_gpu_sample=on_gpu_sample):
        yield pids.update


if __name__ == "__main__":
    sys.exit(cell_main())

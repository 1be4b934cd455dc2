"""The seed study run (`colloc-kit run seed-NN`): every cell of `seed.experiments` not yet complete, over the GPUs'
lanes, lone cells first; a cell whose jobs the lone runs' steady memory says cannot fit is not run, but named with the
arithmetic (out/<experiment>/not-run.json and stderr).

The experiments run side by side, not one after another: an experiment starts as soon as the experiments that run
its jobs alone have ended (its fit check needs their lone runs), and its cells queue behind those under way, so over
several GPUs no lane waits at an experiment's end for the slowest lane (issue 55: eleven such gaps of 10-28 s on four
H200s). Every check of every experiment is made before the first cell starts.

    >>> results = run(SeedSpec(33, data_root="seed-data"), out="runs")                  # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pandas as pd

from colloc_kit import supervise
from colloc_kit.analysis import figures
from colloc_kit.analysis.results import Results, combine
from colloc_kit.analysis.summaries import baselines, data_name
from colloc_kit.experiments.seed import Card, SeedSpec, experiments
from colloc_kit.gpu.mig_catalogue import resolve
from colloc_kit.gpu.mps_detect import one_scan
from colloc_kit.modes.mps import partition_share
from colloc_kit.pipeline import Tally
from colloc_kit.pipeline.cells import Cell, lone_mode
from colloc_kit.pipeline.executors.dispatcher import POLL_S
from colloc_kit.pipeline.executors.gpus import kept_lanes
from colloc_kit.pipeline.spec_run import SpecRun, executor_for
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.statuses import COMPLETE, INTERRUPTED
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.worker.standin import missing_data

__all__ = ["not_fitting", "run"]


def run(seed: SeedSpec, out: str = "runs", progress: bool = True, started_at: float | None = None) -> Results:
    """Run every cell of `seed` not yet complete under out/<experiment>/ and return all its results.

    An experiment starts once those that run its jobs alone have ended (`_runs_alone`) and been read back, its cells
    queued behind the others'; an ended experiment is read back in a thread of its own while this one drives the
    lanes (resumed, the first cell started 33.5 s after the command against 15.1 s fresh, issue 50). A cell whose
    jobs the lone runs' steady memory says cannot fit (figures.copies_fit: the card's memory for naive and MPS, the
    partition's share for partitions) is not run: it is named, with the arithmetic, in out/<experiment>/not-run.json
    and on stderr. The command's wall time, complete or interrupted, from `started_at` (a Unix time: the CLI gives its
    process's start; else now) is kept in out/<experiment>/commands.json (`ExperimentFolder.commands`) and said in
    its closing line.
    """
    started_at = time.time() if started_at is None else started_at
    folder = ExperimentFolder.writable(out, seed.experiment)
    card = Card.here(seed.gpu)
    specs = experiments(seed, card)
    missing_data(seed.experiment, seed.data_root,
                 [job.data_root for spec in specs for job in spec.jobs if job.data_root])
    with one_scan():  # every check before the first cell, on one reading of the machine's MPS daemons
        runners = [executor_for(spec, out, progress=progress) for spec in specs]
    waits_for = [{j for j in range(i) if _runs_alone(specs[j], spec)} for i, spec in enumerate(specs)]
    waiting = list(range(len(specs)))  # indices into specs
    running: dict[int, SpecRun] = {}
    parts: dict[int, Future[Results]] = {}  # the ended experiments' results, read back in a thread of their own
    tally, outcome = Tally(), INTERRUPTED
    reader = ThreadPoolExecutor(1, thread_name_prefix="read-back")
    try:
        with kept_lanes(), supervise.sigterm_as_interrupt():  # over several GPUs: the experiments share the lanes
            while waiting or running:
                read = [j for j, part in parts.items() if part.done()]
                for i in [i for i in waiting if not waits_for[i] & {*waiting, *running, *parts.keys() - {*read}}]:
                    waiting.remove(i)
                    fitting = _fitting(folder, specs[i], card, [parts[j].result().jobs for j in read])
                    if fitting:
                        running[i] = SpecRun(replace(specs[i], modes=fitting), runners[i], tally=tally)
                        running[i].start()
                for i in [i for i, spec_run in running.items() if spec_run.advance()]:
                    ended = running.pop(i)
                    ended.count()  # here, before a later experiment's start asks the tally
                    parts[i] = reader.submit(ended.read)  # the lanes driven on meanwhile
                time.sleep(POLL_S if running or waiting else 0)
            results, outcome = combine([parts[i].result() for i in sorted(parts)]), COMPLETE
    finally:
        reader.shutdown(cancel_futures=True)  # an interrupt: the experiments not yet read are not read
        if outcome != COMPLETE:  # and those under way count the cells they ran (their runs are in the folder)
            tally.add(_ran_since(folder, started_at, [c for r in running.values() for c in r.plan.all]), {})
        ended_at = time.time()  # one clock reading: the record and the closing line say the same wall time
        folder.record_command(started_at, ended_at, len(tally.measured), outcome)
    print(tally.line(seed.experiment, ended_at - started_at))
    return results


def _ran_since(folder: ExperimentFolder, since: float, planned: list[Cell]) -> list[str]:
    """The ids of the cells of `planned` whose run in `folder` started at `since` (a Unix time) or later: what an
    interrupted command measured of the experiments it had under way (one GPU runs an experiment's cells before its
    handles return, so these have none to ask)."""
    states = folder.cell_states()
    return [c.cell_id for c in planned
            if c.cell_id in states and (states[c.cell_id].run.read_manifest().started_at or 0.0) >= since]


def _runs_alone(earlier: ExperimentSpec, spec: ExperimentSpec) -> bool:
    """Whether `earlier` runs alone one of the jobs `spec` runs: `spec`'s fit check waits for its lone runs."""
    return lone_mode(earlier) is not None and bool({_job_key(job) for job in earlier.jobs}
                                                   & {_job_key(job) for job in spec.jobs})


def _job_key(job: JobSpec) -> tuple:
    """What a lone run's footprint is kept by: model, data, batch size, precision."""
    return job.model, job.data_root, job.batch_size, job.amp


def _fitting(folder: ExperimentFolder, spec: ExperimentSpec, card: Card, jobs: list[pd.DataFrame]) -> list[ModeSpec]:
    """The modes of `spec` whose cells fit by the lone runs among `jobs` (the ended experiments' job tables); each
    other one named in the folder's not-run.json and on stderr."""
    unfit = not_fitting(spec, card, pd.concat(jobs) if jobs else None)
    for label, why in unfit.items():
        folder.record_not_run(f"{_workload_label(spec)} {label} x{spec.copies[0]}", why)
        print(f"colloc-kit: not running {label} x{spec.copies[0]}: {why}", file=sys.stderr)
    return [mode for mode in spec.modes if mode.label not in unfit]


def not_fitting(spec: ExperimentSpec, card: Card, jobs: pd.DataFrame | None) -> dict[str, str]:
    """The modes of `spec` (by label) whose cells cannot fit in memory by the lone runs in the job table `jobs`
    (None or no lone run of a job yet: every mode is tried), each with why: what `run` leaves out and `--plan` does
    not count.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(name="x", jobs=[JobSpec(model="smallcnn")], copies=[7], modes=[ModeSpec("mps")])
    >>> not_fitting(spec, Card.here("h100-80gb"), None)
    {}
    """
    need = _lone_footprints(baselines(jobs) if jobs is not None and len(jobs) else None, spec)
    return {mode.label: why for mode in spec.modes if (why := _does_not_fit(need, mode, card))}


def _workload_label(spec: ExperimentSpec) -> str:
    """The jobs of a cell with batch size, precision and the data of the first job (`analysis.data_name`), as
    not-run.json names them; a batch size per job where the jobs' differ (the seed's mixes train with one precision).

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(name="x", jobs=[JobSpec(model="timm.resnet152", batch_size=32),
    ...                                       JobSpec(model="timm.resnet26", batch_size=128)])
    >>> _workload_label(spec)
    'timm.resnet152 bs32 + timm.resnet26 bs128 off'
    >>> _workload_label(ExperimentSpec(name="x", jobs=[JobSpec(model="timm.resnet26", dataset="imagefolder",
    ...                                                        data_root="/data/cifar10")]))
    'timm.resnet26 bs64 off on cifar10'
    """
    same = len({job.batch_size for job in spec.jobs}) == 1
    models = " + ".join(job.model if same else f"{job.model} bs{job.batch_size}" for job in spec.jobs)
    label = f"{models} bs{spec.jobs[0].batch_size} {spec.jobs[0].amp}" if same else f"{models} {spec.jobs[0].amp}"
    data = data_name(spec.jobs[0].dataset, spec.jobs[0].data_root)
    return f"{label} on {data}" if data else label


def _lone_footprints(lone: pd.DataFrame | None, spec: ExperimentSpec) -> list[float] | None:
    """Each job's steady GPU memory alone (MiB) by the lone runs' table `lone` (`analysis.baselines`), one entry per
    job of a run of `spec`; None where a lone run is still missing."""
    if lone is None:
        return None
    need = []
    for job in spec.jobs:
        row = lone[(lone["model"] == job.model) & (lone["data_root"] == job.data_root)
                   & (lone["batch_size"] == job.batch_size) & (lone["amp"] == job.amp)]
        footprint = float(row["baseline_steady_gpu_memory_mb"].iloc[0]) if len(row) else math.nan
        if not footprint > 0:
            return None  # no lone run measured yet: run it and see
        need += [footprint] * spec.copies[0]
    return need


def _does_not_fit(need: list[float] | None, mode: ModeSpec, card: Card) -> str | None:
    """Why jobs with these lone footprints cannot fit in memory under `mode`, or None (they fit, or not known)."""
    if need is None or mode.name == "exclusive":
        return None
    partitions = mode.options.get("partitions")
    if partitions:
        for name, footprint in zip(partitions, need):
            limit = partition_share(resolve(name, card.model), card.model, card.memory_mib)[1]
            if not figures.copies_fit(limit, footprint):
                return (f"a {name} partition holds {limit:,} MiB; one job needs {footprint:,.0f} MiB alone, "
                        f"{figures.MEMORY_MARGIN:.0%} kept free")
        return None
    if math.fsum(need) > card.memory_mib * (1 - figures.MEMORY_MARGIN):
        return (f"{len(need)} jobs need {math.fsum(need):,.0f} MiB (each its steady footprint alone); the GPU has "
                f"{card.memory_mib:,} MiB, {figures.MEMORY_MARGIN:.0%} kept free")
    return None

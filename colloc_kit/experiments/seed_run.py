"""The seed study run (`colloc-kit run seed-NN`): every cell of `seed.experiments` not yet complete, lone cells first,
over the GPUs' lanes; a cell whose jobs the lone runs' steady memory says cannot fit is not run, but named with the
arithmetic (out/<experiment>/not-run.json and stderr).

    >>> results = run(SeedSpec(33, data_root="seed-data"), out="runs")                  # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

from colloc_kit.analysis import figures
from colloc_kit.analysis.results import Results, combine, load
from colloc_kit.analysis.summaries import baselines, data_name
from colloc_kit.experiments.seed import Card, SeedSpec, experiments
from colloc_kit.gpu.mig_catalogue import resolve
from colloc_kit.modes.mps import partition_share
from colloc_kit.pipeline import Tally, executors, run_spec
from colloc_kit.pipeline.cell import preflight
from colloc_kit.spec import ExperimentSpec, ModeSpec
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.worker.standin import missing_data

__all__ = ["run"]


def run(seed: SeedSpec, out: str = "runs", progress: bool = True) -> Results:
    """Run every cell of `seed` not yet complete under out/<experiment>/ and return all its results.

    Lone cells run first; a later cell whose jobs the lone runs' steady memory says cannot fit (figures.copies_fit:
    the card's memory for naive and MPS, the partition's share for partitions) is not run: it is named, with the
    arithmetic, in out/<experiment>/not-run.json and on stderr.
    """
    folder = ExperimentFolder.writable(out, seed.experiment)
    card = Card.here(seed.gpu)
    specs = experiments(seed, card)
    missing_data(seed.experiment, seed.data_root,
                 [job.data_root for spec in specs for job in spec.jobs if job.data_root])
    for spec in specs:  # every dataset and mode checked before the first cell starts
        preflight(spec)
    parts, tally = [], Tally()
    with executors.gpus.kept_lanes():  # over several GPUs: each lane (and its zygote) starts once, not per spec
        for spec in specs:
            fitting, need = [], _lone_footprints(folder.path, spec)  # the folder read once per spec, not once per mode
            for mode in spec.modes:
                why = _does_not_fit(need, mode, card)
                if why:
                    folder.record_not_run(f"{_workload_label(spec)} {mode.label} x{spec.copies[0]}", why)
                    print(f"colloc-kit: not running {mode.label} x{spec.copies[0]}: {why}", file=sys.stderr)
                else:
                    fitting.append(mode)
            if fitting:
                parts.append(run_spec(replace(spec, modes=fitting), out=out, progress=progress, tally=tally))
    print(tally.line(seed.experiment))
    return combine(parts)


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


def _lone_footprints(exp_dir: Path, spec: ExperimentSpec) -> list[float] | None:
    """Each job's steady GPU memory alone (MiB) as the lone runs in `exp_dir` measured it, one entry per job of a
    run of `spec`; None where a lone run is still missing."""
    if not exp_dir.exists():
        return None
    base = baselines(load(exp_dir).jobs)
    need = []
    for job in spec.jobs:
        row = base[(base["model"] == job.model) & (base["data_root"] == job.data_root)
                   & (base["batch_size"] == job.batch_size) & (base["amp"] == job.amp)]
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

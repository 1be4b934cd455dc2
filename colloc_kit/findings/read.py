"""Reading the seed study's data: the runs and not-run lists notebook 08 shows, each run sorted into the study's
cells and kinds (`configurations`), and the cells the data lacks (`missing_cells`), the not-run lists' reasons beside
them. Cells the data lacks are listed, never fatal.

    >>> kind_of("mps", "mps(partitions=3g+3g)"), layout_key("1g+3x2g")
    (('MPS partition (not MIG)', '3g+3g'), '2g+2g+2g+1g')
    >>> results, not_run, note = read("h100-80gb")                        # doctest: +SKIP
    >>> cells, note = configurations(results, "seed-33")                  # doctest: +SKIP
    >>> missing_cells(cells, not_run)                                     # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from colloc_kit import analysis, reference
from colloc_kit.analysis.attribution import study_cells
from colloc_kit.analysis.results import Results, load
from colloc_kit.errors import BadInput
from colloc_kit.experiments import seed
from colloc_kit.gpu.mig_catalogue import gpu_model, model_for_device
from colloc_kit.statuses import COMPLETE

__all__ = ["ALONE", "NAIVE", "MPS", "PARTITION", "MIG", "KINDS", "MIX_MODELS", "STUDY_33", "EVIDENCE",
           "read", "gpu_of", "kind_of", "layout_key", "name_of", "configurations", "Part", "part_of", "summarized",
           "mix_label", "as_run"]

ALONE, NAIVE, MPS, PARTITION, MIG = "alone", "naive", "MPS", seed.PARTITION_LABEL, "MIG"
KINDS = (NAIVE, MPS, PARTITION, MIG)  # the ways of sharing, in the order tables show them
MIX_MODELS = {name: found[0] for name, found in seed.MIX_MODELS.items()}  # 'R26' -> 'timm.resnet26'
# experiments 33-36: per model, (kind, copies, MIG-shaped layout) of the artifact's 13 workloads (seed.py's matrix)
STUDY_33: list[tuple[str, int, str | None]] = [cell for copies in seed.SOLO_COPIES for cell in (
    [(ALONE if copies == 1 else NAIVE, copies, None)]
    + [(PARTITION, copies, "+".join([slice_] * copies)) for slice_ in seed.SOLO_SLICES[copies]]
    + [(MPS, copies, None)])]
EVIDENCE = ["input_wait_share", "host_cpu_util_pct", "jobs", "failed_jobs", "out_of_memory_jobs"]  # beside SM activity
_EVIDENCE_JOBS = ["run_id", "model", "dataset", "data_root", "amp", "batch_size", "input_wait_share", "status",
                  "error_kind"]  # the jobs' columns `_run_evidence` reads


def read(data: str) -> tuple[Results, pd.DataFrame, str]:
    """What notebook 08 reads: a shipped reference set by name, a folder `colloc-kit reference export` wrote, or a
    folder of runs (e.g. your own seed-33 and seed-37); the cells its experiments did not run (`reference.not_run`);
    and one line saying which, or why there is nothing.

    >>> results, not_run, note = read("h100-80gb")                         # doctest: +SKIP
    """
    try:
        results = reference.load(data)
        return results, reference.not_run(data), (f"the reference data {data} ({len(results.runs)} runs of "
                                                  f"{', '.join(sorted(results.runs['experiment'].dropna().unique()))}"
                                                  f"{_placement_text(results)})")
    except BadInput:
        pass
    results = load(data) if Path(data).exists() else Results(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    if results.runs.empty:
        return results, reference.read_not_run([]), (
            f"no runs in {data}, and no reference set of that name (shipped: "
            f"{', '.join(reference.available()) or 'none in this install'}): nothing to show")
    skipped = reference.read_not_run(Path(d).parent for d in results.runs["run_dir"].dropna())
    return results, skipped, f"the runs in {data} ({len(results.runs)} runs{_placement_text(results)})"


def _placement_text(results: Results) -> str:
    """How the runs' jobs sat on the host's cores, by experiment ('' where an older set does not say).
    >>> runs = pd.DataFrame({"experiment": ["seed-33", "seed-37"], "placement": ["unpinned", "pinned"]})
    >>> _placement_text(Results(pd.DataFrame(), pd.DataFrame(), runs))
    '; placement: pinned (seed-37), unpinned (seed-33)'
    """
    if "placement" not in results.runs or results.runs["placement"].isna().all():
        return ""
    by_placement = sorted(results.runs.groupby("placement")["experiment"].unique().items())
    return "; placement: " + ", ".join(f"{how} ({', '.join(sorted(experiments))})" for how, experiments in by_placement)


def gpu_of(results: Results, gpu: str = "") -> str:
    """The MIG table to plan with: `gpu` where given, else the built-in one of the GPU the runs used, else H100-80GB."""
    if gpu:
        return gpu_model(gpu).name
    names = results.runs["gpu_name"].dropna().astype(str) if "gpu_name" in results.runs else []
    found = [m for m in map(model_for_device, names) if m]
    return found[0].name if found else "H100-80GB"


def kind_of(mode: str, label: str | None) -> tuple[str, str | None]:
    """(kind, MIG-shaped layout) of a run from its mode and label: 'mps(partitions=3g+3g)' -> (PARTITION, '3g+3g').

    >>> kind_of("mps", "mps(partitions=3x2g)"), kind_of("exclusive", "exclusive")
    (('MPS partition (not MIG)', '2g+2g+2g'), ('alone', None))
    """
    found = re.search(r"(?:partitions|layout)=([^,)]+)", label or "")
    layout = layout_key(found.group(1)) if found else None
    if mode == "exclusive":
        return ALONE, None
    if mode == "mig":
        return MIG, layout
    if mode == "mps":
        return (PARTITION, layout) if layout else (MPS, None)
    return NAIVE if mode == "naive" else mode, layout


def layout_key(text: str) -> str:
    """A MIG-shaped layout in one spelling, largest first: '1g+3x2g' and '2g,2g,1g,2g' -> '2g+2g+2g+1g'."""
    shapes = []
    for item in re.split(r"[+,]", text):
        match = re.fullmatch(r"\s*(?:(\d+)\s*[x*]\s*)?(\d+g)(?:\.\d+gb)?\s*", item)
        if match:
            shapes += [match.group(2)] * int(match.group(1) or 1)
    return "+".join(sorted(shapes, key=lambda s: -int(s[:-1])))


def name_of(model: str, models: dict[str, str]) -> str | None:
    """The study's name ('R26', 'R50', 'R152') of a model in `models` ({name: model}); 'resnet26' and
    'timm.resnet26' both count as timm.resnet26."""
    for name, wanted in models.items():
        if model == wanted or model.removeprefix("timm.") == wanted.removeprefix("timm."):
            return name
    return None


class Part(NamedTuple):
    """One experiment's runs as the findings read them (`part_of`) and their `analysis.run_summary` rows: what
    `configurations` (its cells) and `fairness.shared_jobs` (its jobs) both start from, summarized once."""

    results: Results
    reference: pd.DataFrame | None
    note: str | None
    runs: pd.DataFrame


def configurations(results: Results, experiment: str, models: dict[str, str] | None = None,
                   part: Part | None = None) -> tuple[pd.DataFrame, str | None]:
    """One row per cell of `experiment` (`analysis.summarize`'s columns) with its kind and layout, the workload or
    mix it trained in the study's terms (`models`: {'R26': model, ...}, the study's timm models by default), and
    the evidence beside summarize's SM activity: input wait share, host CPU, jobs, failed jobs and jobs out of memory
    (`<figure>_mean/_std`). Baselines come from the experiment's own lone runs; where a workload has none there they
    are borrowed from the other experiments of `results`, and the note says so (else None). `part`:
    `summarized(results, experiment)` where the caller has it.
    """
    models = models or MIX_MODELS
    own = results.of_experiments([experiment])
    if own.runs.empty:
        columns = [*analysis.summarize(own).columns, "mix", "model", "dataset", "data", "amp", "batch_size",
                   *(f"{e}_{s}" for e in EVIDENCE for s in ("mean", "std")), "kind", "layout"]
        return pd.DataFrame(columns=columns), f"no runs of {experiment} in the data"
    part = summarized(results, experiment) if part is None else part
    summary = analysis.summarize_runs(part.runs)
    per_run = _run_evidence(part.results, models)
    keys = [k for k in analysis.GROUP_KEYS if k != "workloads"]
    stats = per_run.groupby(keys, dropna=False).agg(
        mix=("mix", "first"), model=("model", "first"), dataset=("dataset", "first"), data=("data", "first"),
        amp=("amp", "first"),
        batch_size=("batch_size", "first"),
        **{f"{e}_{s}": (e, s) for e in EVIDENCE for s in ("mean", "std")}).reset_index()
    out = summary.merge(stats, on=keys, how="left")
    kinds = [kind_of(m, label) for m, label in zip(out["mode"], out["mode_label"])]
    out["kind"] = [k for k, _ in kinds]
    out["layout"] = [layout or "" for _, layout in kinds]  # "" where the kind has no layout
    return out, part.note


def summarized(results: Results, experiment: str) -> Part:
    """The runs of `experiment` the findings read (`part_of`), summarized (`analysis.run_summary`): the study's cells
    only (`study_cells`), a baseline's runs being in the split of the cells they divide."""
    part, reference, note = part_of(results, experiment)
    return Part(part, reference, note, study_cells(analysis.run_summary(part, reference)))


def part_of(results: Results, experiment: str) -> tuple[Results, pd.DataFrame | None, str | None]:
    """The runs of `experiment` the findings read (less the superseded ones, `_without_superseded`); the jobs to take
    baselines from where it lacks lone runs of a workload (all of `results`', else None); a note saying either."""
    part, superseded = _without_superseded(results.of_experiments([experiment]))
    own = analysis.with_baselines(part.jobs)
    lacking = own[own["baseline_note"].notna()] if len(own) else own
    notes = ([f"{experiment}: {superseded} run(s) that did not complete, of cells a later run completed, left out"]
             if superseded else [])
    reference = None
    if len(lacking):
        names = ", ".join(sorted(set(lacking.apply(analysis.workload_label, axis=1))))
        reference = results.jobs
        notes.append(f"{experiment} has no lone run of {names}: its baselines are borrowed from the same workloads "
                     f"in {', '.join(sorted(set(results.runs['experiment'].dropna()) - {experiment})) or 'nowhere'}")
    return part, reference, "; ".join(notes) or None


def _without_superseded(results: Results) -> tuple[Results, int]:
    """The runs, less those that did not complete of cells that a run completed (a resumed experiment reruns a
    failed or interrupted cell: its completed run replaces the earlier one); and how many were left out."""
    runs = results.runs
    if "cell_id" not in runs or runs.empty:
        return results, 0
    done = set(runs.loc[runs["status"] == COMPLETE, "cell_id"].dropna())
    drop = runs["cell_id"].isin(done) & (runs["status"] != COMPLETE)
    if not drop.any():
        return results, 0
    keep = set(runs.loc[~drop, "run_id"])
    return Results(*(frame[frame["run_id"].isin(keep)] if "run_id" in frame else frame
                     for frame in (results.jobs, results.epochs, results.runs))), int(drop.sum())


def _run_evidence(results: Results, models: dict[str, str]) -> pd.DataFrame:
    """Per run: its cell's keys, what it trained (model and dataset of one-workload runs, the mix in study terms),
    and the evidence figures."""
    rows, labels = [], analysis.workloads_by_run(results.jobs)
    read = results.jobs[[c for c in _EVIDENCE_JOBS if c in results.jobs]]  # a run's rows cut from these columns only
    for run_id, run in read.groupby("run_id", sort=False):
        names = Counter(name_of(m, models) for m in run["model"])
        first = run.iloc[0]
        rows.append({"run_id": run_id, "jobs_label": analysis.mix_of(labels[run_id]), "mix": mix_label(names),
                     "model": first["model"], "dataset": first["dataset"], "amp": first["amp"],
                     "data": analysis.data_name(first["dataset"], first.get("data_root")),
                     "batch_size": first["batch_size"],
                     "input_wait_share": _mean(run, "input_wait_share"),
                     "jobs": float(len(run)), "failed_jobs": float(run["status"].ne(COMPLETE).sum()),
                     "out_of_memory_jobs": float(run["error_kind"].eq("out_of_memory").sum())
                     if "error_kind" in run else 0.0})
    evidence = pd.DataFrame(rows)
    host_cpu = results.runs.get("host_cpu_util_pct_mean", pd.Series(math.nan, index=results.runs.index))
    runs = results.runs[["run_id", "experiment", "mode", "mode_label", "copies"]].assign(
        host_cpu_util_pct=host_cpu.astype(float))
    return runs.merge(evidence, on="run_id")


def mix_label(names: Counter) -> str | None:
    """A run's mix in the study's words, e.g. 'R26 + R50 as 2+1' (as seed.py names its cells); None for a run of one
    model or of a model the study did not mix."""
    if None in names or len(names) < 2:
        return None
    for mix in seed.MIXES:
        if set(mix) == set(names):
            return " + ".join(mix) + " as " + "+".join(str(names[n]) for n in mix)
    return None


def as_run(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cells of the recipe as the study ran it (fp32: amp off), and the others (e.g. the bf16 variant); all the
    cells count as run where none is fp32."""
    fp32 = cells["amp"].eq("off") if "amp" in cells else pd.Series(True, index=cells.index)
    return (cells[fp32], cells[~fp32]) if fp32.any() else (cells, cells.iloc[0:0])


def _mean(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).mean() if column in frame and frame[column].notna().any() else math.nan

"""The seed study's claims held against measured runs (notebook 08 and `docs/findings.md`).

Experiment 33 trains copies of one model under naive time-slicing, MPS and MIG-shaped shares (MPS partitions where
MIG is off: "MPS partition (not MIG)"); experiment 37 trains mixes of the three models. `configurations` summarises an
experiment per cell with the evidence beside each gain; `claims` puts each claim of the paper beside what the data
shows; `markdown` writes it all as findings. Every number is computed from the frames given, none is pasted; cells the
data lacks are listed, never fatal.

    >>> results = colloc_kit.reference.load("h100-80gb")                   # doctest: +SKIP
    >>> cells, note = configurations(results, "seed-33")                   # doctest: +SKIP
    >>> missing_cells(cells, STUDY_33)                                     # doctest: +SKIP
    >>> print(markdown(results))                                           # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from collections import Counter

import pandas as pd

from . import analysis, seed
from .errors import BadInput
from .results import Results
from .statuses import COMPLETE

ALONE, NAIVE, MPS, PARTITION, MIG = "alone", "naive", "MPS", seed.PARTITION_LABEL, "MIG"
KINDS = (NAIVE, MPS, PARTITION, MIG)  # the ways of sharing, in the order tables show them
STUDY_GPU = "A100-40GB"
MIX_MODELS = {name: found[0] for name, found in seed.MIX_MODELS.items()}  # 'R26' -> 'timm.resnet26'
# experiments 33-36: per model, (kind, copies, MIG-shaped layout) of the artifact's 13 workloads (seed.py's matrix)
STUDY_33 = [cell for copies in seed.SOLO_COPIES for cell in (
    [(ALONE if copies == 1 else NAIVE, copies, None)]
    + [(PARTITION, copies, "+".join([slice_] * copies)) for slice_ in seed.SOLO_SLICES[copies]]
    + [(MPS, copies, None)])]
CLAIMED_GAIN = 3.0  # "up to three times" (EuroMLSys 2024); arXiv v3 says four
LIKE_33 = {"seed-34": "experiment 33 at batch 32", "seed-35": "CaiT-XXS24 on the three datasets",
           "seed-36": "EfficientNetV2-S on the three datasets"}  # experiment 33's matrix for other workloads
AMPS = ("off", "bf16", "fp16")  # a not-run cell's precision, as seed.py names it
EVIDENCE = ["input_wait_share", "host_cpu_util_pct", "jobs", "failed_jobs", "out_of_memory_jobs"]  # beside SM activity


def read(data: str) -> tuple[Results, pd.DataFrame, str]:
    """What notebook 08 reads: a shipped reference set by name, a folder `colloc-kit reference export` wrote, or a
    folder of runs (e.g. your own seed-33 and seed-37); the cells its experiments did not run (`reference.not_run`);
    and one line saying which, or why there is nothing.

    >>> results, not_run, note = read("h100-80gb")                         # doctest: +SKIP
    """
    from pathlib import Path

    from . import reference
    from .results import load

    try:
        results = reference.load(data)
        return results, reference.not_run(data), (f"the reference data {data} ({len(results.runs)} runs of "
                                                  f"{', '.join(sorted(results.runs['experiment'].dropna().unique()))})")
    except BadInput:
        pass
    results = load(data) if Path(data).exists() else Results(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    if results.runs.empty:
        return results, reference.read_not_run([]), (
            f"no runs in {data}, and no reference set of that name (shipped: "
            f"{', '.join(reference.available()) or 'none in this install'}): nothing to show")
    skipped = reference.read_not_run(Path(d).parent for d in results.runs["run_dir"].dropna())
    return results, skipped, f"the runs in {data} ({len(results.runs)} runs)"


def gpu_of(results: Results, gpu: str = "") -> str:
    """The MIG table to plan with: `gpu` where given, else the built-in one of the GPU the runs used, else H100-80GB."""
    from .gpu.mig_catalogue import gpu_model, model_for_device

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


def configurations(results: Results, experiment: str,
                   models: dict[str, str] | None = None) -> tuple[pd.DataFrame, str | None]:
    """One row per cell of `experiment` (`analysis.summarize`'s columns) with its kind and layout, the workload or
    mix it trained in the study's terms (`models`: {'R26': model, ...}, the study's timm models by default), and
    the evidence beside summarize's SM activity: input wait share, host CPU, jobs, failed jobs and jobs out of memory
    (`<figure>_mean/_std`). Baselines come from the experiment's own lone runs; where a workload has none there they
    are borrowed from the other experiments of `results`, and the note says so (else None).
    """
    models = models or MIX_MODELS
    part = results.of_experiments([experiment])
    if part.runs.empty:
        columns = [*analysis.summarize(part).columns, "mix", "model", "dataset", "data", "amp", "batch_size",
                   *(f"{e}_{s}" for e in EVIDENCE for s in ("mean", "std")), "kind", "layout"]
        return pd.DataFrame(columns=columns), f"no runs of {experiment} in the data"
    part, superseded = _without_superseded(part)
    own = analysis.with_baselines(part.jobs)
    lacking = own[own["baseline_note"].notna()]
    notes = ([f"{experiment}: {superseded} run(s) that did not complete, of cells a later run completed, left out"]
             if superseded else [])
    reference = None
    if len(lacking):
        names = ", ".join(sorted(set(lacking.apply(analysis.workload_label, axis=1))))
        reference = results.jobs
        notes.append(f"{experiment} has no lone run of {names}: its baselines are borrowed from the same workloads "
                     f"in {', '.join(sorted(set(results.runs['experiment'].dropna()) - {experiment})) or 'nowhere'}")
    note = "; ".join(notes) or None
    summary = analysis.summarize(part, reference)
    per_run = _run_evidence(part, models)
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
    return out, note


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
    rows = []
    for run_id, run in results.jobs.groupby("run_id", sort=False):
        names = Counter(name_of(m, models) for m in run["model"])
        first = run.iloc[0]
        rows.append({"run_id": run_id, "jobs_label": analysis.job_mix_label(run), "mix": mix_label(names),
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


def mig_placements(gpus: list[str]) -> pd.DataFrame:
    """For each mix of experiment 37, the MIG layout the study gave it and, on each GPU model, its exact placement
    or why it cannot exist (seed.py's plan of the matrix on that card)."""
    rows: dict[str, dict] = {}
    for gpu in gpus:
        for cell in seed.seed_cells(seed.SeedSpec(37), seed.Card.planned(gpu)):
            if " MIG " in cell.artifact:
                row = rows.setdefault(cell.workload, {"mix": cell.workload, "layout": cell.artifact.rsplit(" ", 1)[1]})
                row[gpu] = cell.mig_layout if cell.mode is not None else f"cannot be placed: {cell.mig_layout}"
    return pd.DataFrame(list(rows.values()))


def missing_cells(cells: pd.DataFrame, not_run: pd.DataFrame | None = None, fit: pd.DataFrame | None = None,
                  gpu: str = "H100-80GB", study: list = STUDY_33) -> pd.DataFrame:
    """Per workload of experiment 33, the study's cells the data lacks (with the reason where the experiment's
    not-run list gives one, or where `fit`, `analysis.memory_fit` on `gpu`'s capacities, says its jobs cannot fit),
    the cells whose jobs ran out of memory and those whose jobs failed otherwise (means over repeats)."""
    skipped = _skipped(not_run, cells["experiment"].iloc[0] if len(cells) else "seed-33")
    rows = [{"workload": "any", "kind": kind, "copies": copies, "layout": layout or "", "state": "not run"}
            for kind, copies, layout in study] if cells.empty else []
    for workload, group in cells.groupby("workloads", sort=True):
        present = {(k, int(c), lay) for k, c, lay in zip(group["kind"], group["copies"], group["layout"])}
        first = group.iloc[0]
        for kind, copies, layout in study:
            if (kind, copies, layout or "") not in present:
                why = _why_skipped(skipped, first, (kind, copies, layout or "")) \
                    or _too_big(fit, workload, copies, layout, gpu)
                rows.append({"workload": workload, "kind": kind, "copies": copies, "layout": layout or "",
                             "state": f"not run, does not fit: {why}" if why else "not run"})
        for _, row in group[group["failed_jobs_mean"].fillna(0) > 0].iterrows():
            oom, failed, jobs = (row[f"{e}_mean"] for e in ("out_of_memory_jobs", "failed_jobs", "jobs"))
            state = f"did not fit: {oom:.0f} of {jobs:.0f} jobs out of memory" if oom else \
                f"failed: {failed:.0f} of {jobs:.0f} jobs did not complete ({row['flags'] or 'see the jobs frame'})"
            rows.append({"workload": workload, "kind": row["kind"], "copies": int(row["copies"]),
                         "layout": row["layout"], "state": state})
    return pd.DataFrame(rows, columns=["workload", "kind", "copies", "layout", "state"])


def _too_big(fit: pd.DataFrame | None, workload: str, copies: int, layout: str | None, gpu: str) -> str | None:
    """Why `copies` jobs of `workload` cannot fit the card (or one its layout's shares), by their steady footprint
    alone (`fit`: analysis.memory_fit on `capacities(gpu)`); None where they fit or nothing is known."""
    from .gpu.mig_catalogue import resolve

    if fit is None or fit.empty:
        return None
    capacity, needed = (f"{gpu} {resolve(layout.split('+')[0], gpu).name}", 1) if layout else (f"{gpu} card", copies)
    found = fit[(fit["workload"] == workload) & (fit["capacity"] == capacity)].dropna(subset=["copies_fit"])
    if found.empty or found["copies_fit"].iloc[0] >= needed:
        return None
    row = found.iloc[0]
    return (f"by its steady footprint alone ({row['steady_gpu_memory_mb']:,.0f} MiB), {_copies(row['copies_fit'])} "
            f"fit in {capacity} ({row['capacity_mb']:,.0f} MiB)")


def _copies(n) -> str:
    return f"{int(n)} cop{'y' if int(n) == 1 else 'ies'}"


def _skipped(not_run: pd.DataFrame | None, experiment: str) -> dict[tuple, str]:
    """{(first model, precision, data, kind, copies, layout): why} of the experiment's not-run cells, named as
    'timm.resnet152 bs128 off on imagenet naive x7'; older folders lack the data ('... bs128 off naive x7') or also
    the precision ('timm.resnet152 naive x7'): None in its place."""
    found = {}
    rows = not_run[not_run["experiment"] == experiment] if not_run is not None and len(not_run) else []
    for cell, why in (zip(rows["cell"], rows["why"]) if len(rows) else []):
        parts = cell.rsplit(" ", 2)
        if len(parts) == 3 and re.fullmatch(r"x\d+", parts[2]):
            jobs, _, data = parts[0].partition(" on ")
            amp = jobs.split()[-1] if jobs.split()[-1] in AMPS else None
            kind, layout = kind_of(parts[1].split("(")[0], parts[1])
            found[(jobs.split(" + ")[0].split(" ")[0], amp, data or None, kind, int(parts[2][1:]), layout or "")] = why
    return found


def _why_skipped(skipped: dict[tuple, str], workload: pd.Series, cell: tuple) -> str | None:
    """Why the not-run list says `cell` (kind, copies, layout) of `workload` (a row with model, amp and data) was
    not run: an entry naming its data and precision, else one from an older folder that names fewer."""
    model, amp, data = workload["model"], workload["amp"], workload["data"]
    for key in ((model, amp, data), (model, amp, None), (model, None, None)):
        if (*key, *cell) in skipped:
            return skipped[(*key, *cell)]
    return None


def as_run(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cells of the recipe as the study ran it (fp32: amp off), and the others (e.g. the bf16 variant); all the
    cells count as run where none is fp32."""
    fp32 = cells["amp"].eq("off") if "amp" in cells else pd.Series(True, index=cells.index)
    return (cells[fp32], cells[~fp32]) if fp32.any() else (cells, cells.iloc[0:0])


def _versus_as_run(variant: pd.DataFrame, study: pd.DataFrame) -> str:
    """The largest gain of the variant's cells (e.g. bf16) beside the largest of the study's recipe."""
    best = [cells.loc[cells["normalized_throughput_mean"].idxmax()] if cells["normalized_throughput_mean"].notna().any()
            else None for cells in (variant[variant["kind"].isin(KINDS)], study[study["kind"].isin(KINDS)])]
    said = [f"{gain_text(b)} ({b['workloads']}, {int(b['copies'])} copies, {b['kind']})" if b is not None
            else "none measured" for b in best]
    return f"The largest gain in {_precisions(variant)}: {said[0]}; as the study ran it: {said[1]}."


def _precisions(cells: pd.DataFrame) -> str:
    return " and ".join(sorted(set(cells["amp"].dropna())))


def for_plots(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with `mode_label` set to their kind (a partition of part of the card named by its layout), so
    that `plots.by_mode` draws one line per way of sharing against copies."""
    part_card = (cells["kind"] == PARTITION) & (cells["copies"] == 1) & (cells["layout"] != "7g")
    label = cells["kind"].where(~part_card, "MPS partition " + cells["layout"] + " (not MIG)")
    return cells[cells["kind"] != ALONE].assign(mode_label=label)


def gain_table(cells: pd.DataFrame, copies: tuple[int, ...] = (2, 3, 7)) -> pd.DataFrame:
    """Per workload and copies: the gain under each way of sharing as 'gain +- CI x (bound by ...)'."""
    shared = cells[cells["kind"].isin(KINDS) & cells["copies"].isin(copies)]
    rows = []
    for (workload, n), group in shared.groupby(["workloads", "copies"], sort=True):
        row = {"workload": workload, "copies": int(n)}
        for _, cell in group.iterrows():
            row[cell["kind"]] = f"{gain_text(cell)} (bound by {_bound(cell)})"
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", "copies", *KINDS]).dropna(axis=1, how="all")


def gain_text(cell: pd.Series) -> str:
    """'2.31 +- 0.05 x' (95 % CI), '2.31 x (no CI)', or 'no baseline'."""
    mean, ci = cell["normalized_throughput_mean"], cell["normalized_throughput_ci"]
    if not _number(mean):
        return "no baseline"
    return f"{mean:.2f} +- {ci:.2f} x" if _number(ci) else f"{mean:.2f} x (no CI)"


def claims(cells33: pd.DataFrame, cells37: pd.DataFrame, placements: pd.DataFrame, fit: pd.DataFrame,
           gpu: str, not_run: pd.DataFrame | None = None) -> list[dict]:
    """Each claim of the paper with what the data shows, a verdict (agrees / partly / disagrees / cannot tell) and
    the evidence, all computed from the frames given."""
    return [_claim_gain(cells33), _claim_fit(cells33, fit, not_run, gpu), _claim_mig(cells33, cells37, placements, gpu),
            _claim_mps(cells33, cells37)]


def _claim_gain(cells: pd.DataFrame) -> dict:
    claim = ("Collocating training runs yields up to three (EuroMLSys 2024) or four (arXiv v3) times the training "
             "throughput, despite longer epochs.")
    shared = cells[cells["kind"].isin(KINDS) & cells["normalized_throughput_mean"].notna()]
    if shared.empty:
        return _verdict(claim, "cannot tell", "no shared cell of experiment 33 with a baseline in the data", [])
    best = shared.loc[shared["normalized_throughput_mean"].idxmax()]
    per_workload = shared.loc[shared.groupby("workloads")["normalized_throughput_mean"].idxmax()]
    gain, ci = best["normalized_throughput_mean"], best["normalized_throughput_ci"]
    ci = ci if _number(ci) else 0.0
    verdict = ("agrees" if gain - ci >= CLAIMED_GAIN else "cannot tell" if gain + ci >= CLAIMED_GAIN  # CI spans 3x
               else "partly" if gain >= 1.5 else "disagrees")
    shows = (f"the largest gain is {gain_text(best)} ({best['workloads']}, {int(best['copies'])} copies, "
             f"{best['kind']}), each job's epoch {best['epoch_time_growth_mean']:.2f} x as long as alone")
    evidence = [f"{row['workloads']}: best {gain_text(row)} at {int(row['copies'])} copies ({row['kind']}), "
                f"epoch x {row['epoch_time_growth_mean']:.2f}, bound by {_bound(row)}; alone: "
                f"{_alone_evidence(cells, row['workloads'])}" for _, row in per_workload.iterrows()]
    return _verdict(claim, verdict, shows, evidence)


def _claim_fit(cells: pd.DataFrame, fit: pd.DataFrame, not_run: pd.DataFrame | None, gpu: str) -> dict:
    claim = "The collocated models' aggregate memory footprint and compute needs must fit the GPU."
    missing = missing_cells(cells, not_run, fit, gpu)
    oom = missing[missing["state"].str.contains("not fit")]
    evidence = [f"{r.workload}: {r.kind} x{r.copies}{' on ' + r.layout if r.layout else ''}: {r.state}"
                for r in oom.itertuples()]
    known = fit.dropna(subset=["copies_fit"]) if len(fit) else fit
    if len(known):  # the cards and the smallest shares
        known = known[known["capacity"].str.endswith(" card") | known["capacity"].str.contains(" 1g.")]
    evidence += [f"{r.workload}: {r.steady_gpu_memory_mb:,.0f} MiB steady alone; {_copies(r.copies_fit)} fit in "
                 f"{r.capacity}" for r in known.itertuples()]
    lines, compute_binds = _saturation(cells)
    evidence += lines
    if cells.empty:
        return _verdict(claim, "cannot tell", "no runs of experiment 33", evidence)
    shows = "; ".join([
        f"{len(oom)} cell(s) did not fit in memory" if len(oom) else "every cell fit in memory",
        "the workload whose lone job kept the SMs busiest gained least from copies" if compute_binds else
        "the gains do not fall with the lone jobs' SM activity" if compute_binds is False else
        "no SM activity measured beside the gains"])
    return _verdict(claim, "agrees" if len(oom) or compute_binds else "cannot tell", shows, evidence)


def _saturation(cells: pd.DataFrame) -> tuple[list[str], bool | None]:
    """Per workload: how busy its lone job kept the SMs beside the best gain copies gave; and whether the busiest
    one gained least (compute must fit too), None with fewer than two such workloads."""
    rows = []
    for workload, group in cells.groupby("workloads", sort=True):
        alone = group[group["kind"] == ALONE]
        shared = group[group["kind"].isin(KINDS)].dropna(subset=["normalized_throughput_mean"])
        if len(alone) and len(shared) and _number(alone["sm_util_pct_mean"].iloc[0]):
            rows.append((workload, float(alone["sm_util_pct_mean"].iloc[0]),
                         shared["normalized_throughput_mean"].max()))
    lines = [f"{w}: alone its SMs were {sm:.0f} % active; the best gain from copies was {gain:.2f} x"
             for w, sm, gain in rows]
    if len(rows) < 2:
        return lines, None
    busiest = max(rows, key=lambda r: r[1])
    return lines, busiest[2] == min(r[2] for r in rows)


def _claim_mig(cells33: pd.DataFrame, cells37: pd.DataFrame, placements: pd.DataFrame, gpu: str) -> dict:
    claim = ("MIG's interference-free partitions help when the models' sizes align with its profiles; its rigid "
             "partitioning can leave the GPU under-used for mixed workloads.")
    evidence = []
    for cells, what in ((cells33, "copies"), (cells37, "mixes")):
        pairs = _versus(cells, PARTITION, MPS)
        evidence += [f"{what}: {label}: partitions {a} against MPS {b}" for label, a, b in pairs]
    unplaceable = placements[placements[gpu].str.startswith("cannot")] if gpu in placements else placements.iloc[0:0]
    evidence += [f"MIG {r['layout']} for {r['mix']} {r[gpu]}" for _, r in unplaceable.iterrows()]
    ratios = [_ratio(cells, PARTITION, MPS) for cells in (cells33, cells37)]
    if all(r is None for r in ratios):
        shows = f"no partition run beside an MPS run in the data; {len(unplaceable)} of the study's mixes cannot be " \
                f"placed as MIG on {gpu}"
        return _verdict(claim, "cannot tell", shows, evidence)
    same, mixed = ratios
    shows = "; ".join(s for s in (
        f"equal copies on partitions trained {same:.2f} x what MPS did" if same is not None else None,
        f"mixes on partitions trained {mixed:.2f} x what MPS did" if mixed is not None else None,
        f"{len(unplaceable)} of the study's {len(placements)} mixes cannot be placed as MIG on {gpu}")
        if s)
    verdict = "agrees" if (mixed is None or mixed < 1) and (same is None or same >= 0.9) else "partly"
    return _verdict(claim, verdict, shows + " (MPS partitions share SMs and memory bandwidth: no MIG isolation)",
                    evidence)


def _claim_mps(cells33: pd.DataFrame, cells37: pd.DataFrame) -> dict:
    claim = "MPS is the best performing and most flexible way of collocation for a single user."
    outcomes = []
    for cells in (cells33, cells37):
        for key, group in _comparable(cells):
            best = group.loc[group["normalized_throughput_mean"].idxmax()]
            mps = group[group["kind"] == MPS]
            if mps.empty:
                continue
            lead = mps.iloc[0]
            tied = best["kind"] == MPS or _overlap(lead, best)
            outcomes.append((key, tied, best["kind"], gain_text(lead), gain_text(best)))
    if not outcomes:
        return _verdict(claim, "cannot tell", "no cell has MPS beside another way of sharing", [])
    wins = sum(tied for _, tied, *_ in outcomes)
    verdict = "agrees" if wins == len(outcomes) else "partly" if wins * 2 >= len(outcomes) else "disagrees"
    evidence = [f"{key}: MPS {lead}" + ("" if tied else f", behind {kind} {best}")
                for key, tied, kind, lead, best in outcomes]
    return _verdict(claim, verdict, f"MPS was best or within the CIs of the best in {wins} of {len(outcomes)} cells",
                    evidence)


def _comparable(cells: pd.DataFrame):
    """Groups of cells that trained the same thing (workload and copies, or mix) under different ways of sharing."""
    shared = cells[cells["kind"].isin(KINDS)].dropna(subset=["normalized_throughput_mean"])
    shared = shared[(shared["copies"] > 1) | shared["mix"].notna()]  # jobs that shared the card, not one alone
    keys = shared["mix"].fillna(shared["workloads"] + " x" + shared["copies"].astype(str))
    for key, group in shared.groupby(keys, sort=True):
        if group["kind"].nunique() > 1:
            yield key, group


def _versus(cells: pd.DataFrame, a: str, b: str) -> list[tuple[str, str, str]]:
    return [(key, gain_text(g[g["kind"] == a].iloc[0]), gain_text(g[g["kind"] == b].iloc[0]))
            for key, g in _comparable(cells) if {a, b} <= set(g["kind"])]


def _ratio(cells: pd.DataFrame, a: str, b: str) -> float | None:
    """Mean over comparable cells of kind a's gain over kind b's."""
    ratios = [g.loc[g["kind"] == a, "normalized_throughput_mean"].iloc[0] /
              g.loc[g["kind"] == b, "normalized_throughput_mean"].iloc[0]
              for _, g in _comparable(cells) if {a, b} <= set(g["kind"])]
    return sum(ratios) / len(ratios) if ratios else None


def _overlap(x: pd.Series, y: pd.Series) -> bool:
    """Whether two gains' 95 % CIs overlap (an unknown CI counts as no overlap)."""
    cx, cy = x["normalized_throughput_ci"], y["normalized_throughput_ci"]
    if not (_number(cx) and _number(cy)):
        return False
    return abs(x["normalized_throughput_mean"] - y["normalized_throughput_mean"]) <= cx + cy


def _alone_evidence(cells: pd.DataFrame, workload: str) -> str:
    alone = cells[(cells["workloads"] == workload) & (cells["kind"] == ALONE)]
    if alone.empty:
        return "no lone run"
    row = alone.iloc[0]
    parts = [f"bound by {_bound(row)}"]
    for column, text in (("sm_util_pct_mean", "SMs {:.0f} % active"),
                         ("input_wait_share_mean", "waited for data {:.0%}"),
                         ("host_cpu_util_pct_mean", "host CPU {:.0f} % busy")):
        if column in row and _number(row[column]):
            parts.append(text.format(row[column]))
    return ", ".join(parts)


def _verdict(claim: str, verdict: str, shows: str, evidence: list[str]) -> dict:
    return {"claim": claim, "verdict": verdict, "shows": shows, "evidence": evidence}


def a100_note(fit: pd.DataFrame, gpu: str) -> list[str]:
    """What a user of the study's A100-40GB should expect, from the card tables and the measured footprints."""
    from .gpu.mig_catalogue import gpu_model

    here, there = gpu_model(gpu), gpu_model(STUDY_GPU)
    lines = [f"{there.name} has {there.sm_count} SMs and {there.total_memory_mib:,} MiB against {here.sm_count} SMs "
             f"and {here.total_memory_mib:,} MiB on {here.name}: a job that keeps this card's SMs busy alone keeps the "
             "smaller card busier still, so its copies gain no more there; a job that leaves SMs idle here (host- or "
             "input-bound) leaves them idle there too, and copies gain on both."]
    a100 = fit[fit["capacity"].astype(str).str.startswith(STUDY_GPU)].dropna(subset=["copies_fit"]) if len(fit) else fit
    lines += [f"{r.workload}: {_copies(r.copies_fit)} fit in {r.capacity} (steady {r.steady_gpu_memory_mb:,.0f} MiB "
              "measured here)" for r in a100.itertuples()]
    return lines


def capacities(gpu: str, with_study_gpu: bool = True) -> dict[str, float]:
    """Memory capacities to count copies against: the card and its MIG profiles (and the study's A100-40GB)."""
    from .gpu.mig_catalogue import gpu_model

    out = {}
    models = [gpu_model(gpu)] + ([gpu_model(STUDY_GPU)] if with_study_gpu and gpu_model(gpu).name != STUDY_GPU else [])
    for model in models:
        out[f"{model.name} card"] = float(model.total_memory_mib)
        out.update({f"{model.name} {p.name}": float(p.memory_mib) for p in model.profiles
                    if not p.media_extensions and p.compute_slices in (1, 2, 3, 4)})
    return out


def markdown(results: Results, gpu: str, models: dict[str, str] | None = None, source: str = "",
             not_run: pd.DataFrame | None = None) -> str:
    """The findings as Markdown, ready for docs/findings.md: the gain table of experiment 33 (and of 34-36 where the
    data has them), the mixes of 37, each claim beside what the data shows, and what an A100 user should expect."""
    from . import notebook

    all33, note33 = configurations(results, "seed-33", models)
    cells33, variant33 = as_run(all33)
    cells37, note37 = configurations(results, "seed-37", models)
    placements = mig_placements([gpu, STUDY_GPU])
    fit = analysis.memory_fit(results.of_experiments(["seed-33"]).jobs, capacities(gpu)) \
        if len(results.jobs) else pd.DataFrame(columns=["capacity", "copies_fit"])
    lines = ["# Findings: the seed study on this data", "",
             f"Drawn by notebook 08 from {source or 'the runs given'}; every number below is computed from them "
             "(gain = normalized throughput, 1 = one job alone; +- is the 95 % CI).", ""]
    noise = notebook.noise_warning(results.of_experiments(["seed-33", "seed-37"]).jobs, all33)
    lines += [f"> {n}" for n in (note33, note37, noise and f"noise: {noise}") if n] + [""]
    found = claims(cells33, cells37, placements, fit, gpu, not_run)
    lines += ["## The claims", ""]
    for i, claim in enumerate(found, 1):
        lines += [f"{i}. **{claim['claim']}**", f"   - *{claim['verdict']}*: {claim['shows']}.",
                  *(f"   - {e}" for e in claim["evidence"]), ""]
    differ = sorted((c for c in found if c["verdict"] in ("disagrees", "partly")),
                    key=lambda c: c["verdict"] != "disagrees")
    lines += ["## Where the data differs most from the paper", "",
              *([f"- {c['claim']} *{c['verdict']}*: {c['shows']}." for c in differ[:3]] or
                ["- nowhere that the data can tell"]), ""]
    gains = gain_table(cells33)
    lines += ["## Experiment 33: gain at 2, 3 and 7 copies", "",
              _table(gains) if len(gains) else "No shared cell of experiment 33 in the data.", ""]
    missing = missing_cells(cells33, not_run, fit, gpu)
    lines += ["### Cells not run or that did not fit", "",
              _table(missing) if len(missing) else "Every cell of the study ran.", ""]
    if len(variant33):
        gains, missing = gain_table(variant33), missing_cells(variant33, not_run, fit, gpu)
        amp = _precisions(variant33)
        lines += [f"## Experiment 33 in {amp}", "", f"The study's recipe with {amp} autocast, as users train today; "
                  "the claims above hold the recipe as the study ran it (fp32).", "",
                  _versus_as_run(variant33, cells33), "",
                  _table(gains) if len(gains) else f"No shared cell measured in {amp}.", "",
                  f"### Cells not run or that did not fit ({amp})", "",
                  _table(missing) if len(missing) else f"Every cell ran in {amp}.", ""]
    for experiment, what in LIKE_33.items():  # where the data has them, however partly
        cells, note = configurations(results, experiment, models)
        measured = cells[cells["normalized_throughput_mean"].notna()]  # a cell with a complete run
        if len(cells):
            gains = gain_table(measured)
            lines += [f"## Experiment {experiment.removeprefix('seed-')}: {what}", "",
                      *([f"> {note}", ""] if note else []),
                      f"{len(measured)} of the study's {len(STUDY_33) * 3} cells measured.", "",
                      _table(gains) if len(gains) else "No shared cell measured yet.", ""]
    mixes = cells37[cells37["kind"].isin(KINDS)] if len(cells37) else cells37
    lines += ["## Experiment 37: mixed workloads", "", _table(pd.DataFrame({
        "mix": mixes.get("mix", pd.Series(dtype=str)).fillna(mixes.get("jobs_label", "")),
        "sharing": mixes.get("kind"), "gain": [gain_text(r) for _, r in mixes.iterrows()],
        "bound by": mixes.get("bound_by")})) if len(mixes) else "No mixed run in the data.", ""]
    skipped = not_run[not_run["experiment"] == "seed-37"] if not_run is not None and len(not_run) else []
    if len(skipped):
        lines += ["### Mixes not run", "", _table(skipped[["cell", "why"]]), ""]
    lines += ["### MIG layouts of the study's mixes", "", _table(placements), ""]
    lines += ["## What a user of the study's A100-40GB should expect", "", *(f"- {x}" for x in a100_note(fit, gpu)), ""]
    return "\n".join(lines)


def _table(frame: pd.DataFrame) -> str:
    """A frame as a Markdown table (no index; empty cells blank)."""
    frame = frame.fillna("").astype(str)
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    return "\n".join([head, rule] + ["| " + " | ".join(row) + " |" for row in frame.itertuples(index=False)])


def _mean(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).mean() if column in frame and frame[column].notna().any() else math.nan


def _bound(row: pd.Series) -> str:
    return row["bound_by"] if isinstance(row["bound_by"], str) else "unknown"


def _number(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))

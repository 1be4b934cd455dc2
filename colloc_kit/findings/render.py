"""Rendering the findings: `markdown` writes docs/findings.md (the claims judged by `judge.claims`, the gain tables of
experiments 33-36, the mixes of 37, what an A100 user should expect); `gain_table` and `for_plots` shape the cells
for the notebook's tables and figures.

    >>> cell = {"workloads": "resnet26 bs128", "copies": 2, "kind": "MPS", "normalized_throughput_mean": 1.8,
    ...         "normalized_throughput_ci": 0.05, "bound_by": "gpu"}
    >>> gain_table(pd.DataFrame([cell])).to_dict("records")
    [{'workload': 'resnet26 bs128', 'copies': 2, 'MPS': '1.80 +- 0.05 x (bound by gpu)'}]
    >>> text = markdown(results, "H100-80GB", source="the reference data")  # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from .. import analysis, notebook, predict_check
from ..gpu.mig_catalogue import gpu_model
from ..results import Results
from .judge import STUDY_GPU, _bound, capacities, claims, gain_text, mig_placements, prediction_errors
from .fairness import FAIRNESS_TEXT, SHARES_TEXT, fairness_findings
from .read import ALONE, KINDS, PARTITION, STUDY_33, _copies, as_run, configurations, missing_cells

__all__ = ["LIKE_33", "markdown", "gain_table", "for_plots", "a100_note"]

LIKE_33 = {"seed-34": "experiment 33 at batch 32", "seed-35": "CaiT-XXS24 on the three datasets",
           "seed-36": "EfficientNetV2-S on the three datasets"}  # experiment 33's matrix for other workloads


def markdown(results: Results, gpu: str, models: dict[str, str] | None = None, source: str = "",
             not_run: pd.DataFrame | None = None) -> str:
    """The findings as Markdown, ready for docs/findings.md: the gain table of experiment 33 (and of 34-36 where the
    data has them), the mixes of 37, each claim beside what the data shows, and what an A100 user should expect."""
    all33, note33 = configurations(results, "seed-33", models)
    cells33, variant33 = as_run(all33)
    cells37, note37 = configurations(results, "seed-37", models)
    placements = mig_placements([gpu, STUDY_GPU])
    fit = analysis.memory_fit(results.of_experiments(["seed-33"]).jobs, capacities(gpu)) \
        if len(results.jobs) else pd.DataFrame(columns=["capacity", "copies_fit"])
    noise = notebook.noise_warning(results.of_experiments(["seed-33", "seed-37"]).jobs, all33)
    lines = ["# Findings: the seed study on this data", "",
             f"Drawn by notebook 08 from {source or 'the runs given'}; every number below is computed from them "
             "(gain = normalized throughput, 1 = one job alone; +- is the 95 % CI).", "",
             *(f"> {n}" for n in (note33, note37, noise and f"noise: {noise}") if n), "",
             *_claims_section(claims(cells33, cells37, placements, fit, gpu, not_run)),
             *_section_33(cells33, not_run, fit, gpu),
             *_variant_section(variant33, cells33, not_run, fit, gpu),
             *_like_33_sections(results, models),
             *_mixes_section(cells37, not_run, placements),
             *_fairness_section(fairness_findings(results, models)),
             *_prediction_section(results),
             "## What a user of the study's A100-40GB should expect", "", *(f"- {x}" for x in a100_note(fit, gpu)), ""]
    return "\n".join(lines)


def _fairness_section(found: dict | None) -> list[str]:
    """Who lost when jobs shared (`fairness.fairness_findings`), and the shares asked and had; nothing without it."""
    if found is None:
        return []
    shares = ["### Shares asked and had", "", SHARES_TEXT, "", _table(found["shares"]), ""] if len(found["shares"]) \
        else []
    return ["## Fairness: who lost when jobs shared", "", FAIRNESS_TEXT, "", f"- {found['shows']}.",
            *(f"- {e}" for e in found["evidence"]), "", "### The least fair cells", "", _table(found["least_fair"]),
            "", *shares]


def _prediction_section(results: Results) -> list[str]:
    """What predicts a gain: the model's error per mode on this data's collocated cells (none: no section)."""
    errors = prediction_errors(results)
    if errors.empty:
        return []
    rows = [f"| {r.mode} | {r.cells} | {100 * r.median:.1f} % | {100 * r.p90:.1f} % |" for r in errors.itertuples()]
    return ["## What predicts a gain", "",
            "Each collocated cell predicted from its lone runs alone by `colloc_kit.predict` (a job's share of the GPU "
            "it leaves idle, its host cores and input pipeline, its memory), against what it measured; the model's "
            f"four constants were fitted on {predict_check.HOLD_OUT}, so its cells are left out here. The model, "
            "its five worst cells and why: [predict.md](predict.md); `colloc-kit advise` ranks configurations by it.",
            "", "| mode | cells | median error of the gain | 90th percentile |", "|---|---|---|---|", *rows, ""]


def _claims_section(found: list[dict]) -> list[str]:
    """Each claim with its verdict and evidence, then those where the data differs most from the paper."""
    lines = ["## The claims", ""]
    for i, claim in enumerate(found, 1):
        lines += [f"{i}. **{claim['claim']}**", f"   - *{claim['verdict']}*: {claim['shows']}.",
                  *(f"   - {e}" for e in claim["evidence"]), ""]
    differ = sorted((c for c in found if c["verdict"] in ("disagrees", "partly")),
                    key=lambda c: c["verdict"] != "disagrees")
    return lines + ["## Where the data differs most from the paper", "",
                    *([f"- {c['claim']} *{c['verdict']}*: {c['shows']}." for c in differ[:3]] or
                      ["- nowhere that the data can tell"]), ""]


def _section_33(cells: pd.DataFrame, not_run: pd.DataFrame | None, fit: pd.DataFrame, gpu: str) -> list[str]:
    """Experiment 33 as the study ran it: its gains, and the cells not run or that did not fit."""
    gains, missing = gain_table(cells), missing_cells(cells, not_run, fit, gpu)
    return ["## Experiment 33: gain at 2, 3 and 7 copies", "",
            _table(gains) if len(gains) else "No shared cell of experiment 33 in the data.", "",
            "### Cells not run or that did not fit", "",
            _table(missing) if len(missing) else "Every cell of the study ran.", ""]


def _variant_section(variant: pd.DataFrame, study: pd.DataFrame, not_run: pd.DataFrame | None, fit: pd.DataFrame,
                     gpu: str) -> list[str]:
    """Experiment 33 in another precision (e.g. bf16) beside the study's recipe; nothing where the data has none."""
    if variant.empty:
        return []
    gains, missing = gain_table(variant), missing_cells(variant, not_run, fit, gpu)
    amp = _precisions(variant)
    return [f"## Experiment 33 in {amp}", "", f"The study's recipe with {amp} autocast, as users train today; "
            "the claims above hold the recipe as the study ran it (fp32).", "",
            _versus_as_run(variant, study), "",
            _table(gains) if len(gains) else f"No shared cell measured in {amp}.", "",
            f"### Cells not run or that did not fit ({amp})", "",
            _table(missing) if len(missing) else f"Every cell ran in {amp}.", ""]


def _like_33_sections(results: Results, models: dict[str, str] | None) -> list[str]:
    """The gains of experiments 34-36 (experiment 33's matrix for other workloads), where the data has them."""
    lines = []
    for experiment, what in LIKE_33.items():  # where the data has them, however partly
        cells, note = configurations(results, experiment, models)
        measured = cells[cells["normalized_throughput_mean"].notna()]  # a cell with a complete run
        if len(cells):
            gains = gain_table(measured)
            lines += [f"## Experiment {experiment.removeprefix('seed-')}: {what}", "",
                      *([f"> {note}", ""] if note else []),
                      f"{len(measured)} of the study's {len(STUDY_33) * 3} cells measured.", "",
                      _table(gains) if len(gains) else "No shared cell measured yet.", ""]
    return lines


def _mixes_section(cells37: pd.DataFrame, not_run: pd.DataFrame | None, placements: pd.DataFrame) -> list[str]:
    """Experiment 37: the gain of each mix under each way of sharing, the mixes not run, their MIG layouts."""
    mixes = cells37[cells37["kind"].isin(KINDS)] if len(cells37) else cells37
    lines = ["## Experiment 37: mixed workloads", "", _table(pd.DataFrame({
        "mix": mixes.get("mix", pd.Series(dtype=str)).fillna(mixes.get("jobs_label", "")),
        "sharing": mixes.get("kind"), "gain": [gain_text(r) for _, r in mixes.iterrows()],
        "bound by": mixes.get("bound_by")})) if len(mixes) else "No mixed run in the data.", ""]
    skipped = not_run[not_run["experiment"] == "seed-37"] if not_run is not None and len(not_run) else None
    if skipped is not None and len(skipped):
        lines += ["### Mixes not run", "", _table(skipped[["cell", "why"]]), ""]
    return lines + ["### MIG layouts of the study's mixes", "", _table(placements), ""]


def _table(frame: pd.DataFrame) -> str:
    """A frame as a Markdown table (no index; empty cells blank)."""
    frame = frame.fillna("").astype(str)
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    return "\n".join([head, rule] + ["| " + " | ".join(row) + " |" for row in frame.itertuples(index=False)])


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


def a100_note(fit: pd.DataFrame, gpu: str) -> list[str]:
    """What a user of the study's A100-40GB should expect, from the card tables and the measured footprints."""
    here, there = gpu_model(gpu), gpu_model(STUDY_GPU)
    lines = [f"{there.name} has {there.sm_count} SMs and {there.total_memory_mib:,} MiB against {here.sm_count} SMs "
             f"and {here.total_memory_mib:,} MiB on {here.name}: a job that keeps this card's SMs busy alone keeps the "
             "smaller card busier still, so its copies gain no more there; a job that leaves SMs idle here (host- or "
             "input-bound) leaves them idle there too, and copies gain on both."]
    a100 = fit[fit["capacity"].astype(str).str.startswith(STUDY_GPU)].dropna(subset=["copies_fit"]) if len(fit) else fit
    lines += [f"{r.workload}: {_copies(r.copies_fit)} fit in {r.capacity} (steady {r.steady_gpu_memory_mb:,.0f} MiB "
              "measured here)" for r in a100.itertuples()]
    return lines

"""The findings as a short report (notebook 08 and docs/findings.md): one verdict table (claim, verdict, the evidence
in one line, a link to its figure), one figure per claim, what predicts a gain and what an A100 user should expect,
then an appendix of detail tables with repeated lines grouped. `report` gathers it all once; `markdown` writes it.

    >>> found = report(results, "H100-80GB", source="the reference data", not_run=not_run)   # doctest: +SKIP
    >>> verdicts(found)                                             # the table notebook 08 opens with  # doctest: +SKIP
    >>> text = markdown(results, "H100-80GB", source="the reference data", images="img/findings")  # doctest: +SKIP
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.attribution import study_cells
from colloc_kit.analysis.results import Results
from colloc_kit.findings.appendix import (
    fit_table, gain_table, grouped_evidence, grouped_fairness, mix_shares, mix_table, not_run_table, pretty,
    shares_by_layout, unplaceable,
)
from colloc_kit.findings.charts import TITLES
from colloc_kit.findings.fairness import FAIRNESS_TEXT, SHARES_TEXT, fairness_findings
from colloc_kit.findings.judge import STUDY_GPU, capacities, claims, gain_text, mig_placements, prediction_errors
from colloc_kit.findings.missing import missing_cells
from colloc_kit.findings.read import KINDS, STUDY_33, as_run, configurations, summarized
from colloc_kit.findings.verdict import grouped, listed, noise_by_claim
from colloc_kit.gpu.mig_catalogue import gpu_model
from colloc_kit.predict import check as predict_check
from colloc_kit.views.tables import table

__all__ = ["LIKE_33", "Report", "report", "verdicts", "because", "all_gains",
           "all_missing", "markdown", "as_markdown", "a100_note"]

LIKE_33 = {"seed-34": "experiment 33 at batch 32", "seed-35": "CaiT-XXS24 on the three datasets",
           "seed-36": "EfficientNetV2-S on the three datasets"}  # experiment 33's matrix for other workloads
APPENDIX = {"gains": "B. Gains of experiments 33-36", "mixes": "C. Gains of the mixes of experiment 37",
            "not-run": "D. Cells not run (predicted not to fit) or whose jobs ran out of memory",
            "fit": "E. Copies that fit in memory",
            "mig": "F. MIG layouts that cannot be placed", "fair": "G. The least fair cells",
            "shares": "H. Shares asked and had"}


@dataclass
class Report:
    """Everything the findings say, computed once from the data (`report`)."""

    gpu: str
    source: str
    notes: list[str]  # on the data: borrowed baselines, runs left out
    cells33: pd.DataFrame  # experiment 33 as the study ran it (fp32)
    variant33: pd.DataFrame  # experiment 33 in another precision (bf16), where the data has it
    cells37: pd.DataFrame
    fit: pd.DataFrame  # analysis.memory_fit on the card's and the study's capacities
    placements: pd.DataFrame  # the MIG layouts of the mixes on this card and the study's
    not_run: pd.DataFrame | None
    claims: list[dict]
    like33: dict[str, pd.DataFrame] = field(default_factory=dict)  # experiments 34-36: their measured cells
    errors: pd.DataFrame = field(default_factory=pd.DataFrame)  # the prediction model's errors (prediction_errors)
    fairness: dict | None = None  # who lost when jobs shared, shares asked and had (fairness.fairness_findings)
    noise: str | None = None  # the noise check's warnings (`analysis.noise`), said under the claims they bear on


def report(results: Results, gpu: str, models: dict[str, str] | None = None, source: str = "",
           not_run: pd.DataFrame | None = None) -> Report:
    """The findings of `results` on `gpu`'s MIG tables: the cells, the claims judged, and what the appendix shows."""
    ran = set(results.runs.get("experiment", []))
    parts = {e: summarized(results, e) for e in ("seed-33", "seed-37") if e in ran}  # for the cells and fairness both
    all33, note33 = configurations(results, "seed-33", models, parts.get("seed-33"))
    cells33, variant33 = as_run(all33)
    cells37, note37 = configurations(results, "seed-37", models, parts.get("seed-37"))
    placements = mig_placements([gpu, STUDY_GPU])
    fit = analysis.memory_fit(study_cells(results.of_experiments(["seed-33"]).jobs), capacities(gpu)) \
        if len(results.jobs) else pd.DataFrame(columns=["workload", "capacity", "copies_fit", "steady_gpu_memory_mb"])
    noise = analysis.noise(results.of_experiments(["seed-33", "seed-37"]).jobs, all33)  # said, never greying
    like33 = {}
    for experiment in LIKE_33:
        cells, _ = configurations(results, experiment, models)
        if len(cells):
            like33[experiment] = cells
    return Report(gpu, source or "the runs given", [n for n in (note33, note37) if n],
                  cells33, variant33, cells37, fit, placements, not_run,
                  claims(cells33, cells37, placements, fit, gpu, not_run, variant33, like33), like33,
                  prediction_errors(), fairness_findings(results, models, summaries=parts), noise)


def verdicts(found: Report) -> pd.DataFrame:
    """One row per claim: its number, the claim, the verdict, and because: what the data shows, the rule that
    decided it and the noise that bears on it, in prose (`because`)."""
    return pd.DataFrame([{"#": i, "the paper claims": c["claim"], "verdict": c["verdict"],
                          "because": because(found, i)} for i, c in enumerate(found.claims, 1)])


def because(found: Report, number: int) -> str:
    """Why claim `number` got its verdict: what the data shows, its scope, the cells that decided it and those set
    aside, the rule, and the noise that bears on it."""
    claim = found.claims[number - 1]
    noise = noise_by_claim(found.noise).get(number)
    decided, aside = (listed(claim.get(key, []), "appendix A") for key in ("decided", "set_aside"))
    return " ".join(s for s in (f"{_sentence(pretty(claim['shows']))}",
                                f"Scope: {_period(claim['scope'])}" if claim.get("scope") else "",
                                f"Decided by: {_period(decided)}" if decided else "",
                                f"Set aside: {_period(aside)}" if aside else "",
                                f"The rule: {_period(claim['rule'])}" if claim.get("rule") else "",
                                f"Noise: {_period(noise)}" if noise else "") if s)


def _sentence(text: str) -> str:
    return _period(text[:1].upper() + text[1:])


def _period(text: str) -> str:
    return text.strip() + ("" if text.strip().endswith(".") else ".")


def all_gains(found: Report) -> pd.DataFrame:
    """The gains of experiment 33 in every precision and of 34-36, one row per workload and copies."""
    frames = [gain_table(cells).assign(experiment=name) for name, cells in _gain_sets(found)]
    return pd.concat(frames, ignore_index=True).reindex(columns=["experiment", "workload", "copies", *KINDS,
                                                                 "bound by"]).dropna(axis=1, how="all")


def all_missing(found: Report) -> pd.DataFrame:
    """Experiment 33's cells the data lacks or whose jobs failed, in every precision (`read.missing_cells`)."""
    return pd.concat([missing_cells(cells, found.not_run, found.fit, found.gpu)
                      for cells in (found.cells33, found.variant33) if len(cells) or cells is found.cells33])


def markdown(results: Results, gpu: str, models: dict[str, str] | None = None, source: str = "",
             not_run: pd.DataFrame | None = None, images: str = "") -> str:
    """The findings of `results` as Markdown (`report`, then `as_markdown`), ready for docs/findings.md."""
    return as_markdown(report(results, gpu, models, source, not_run), images)


def as_markdown(found: Report, images: str = "") -> str:
    """The report as Markdown, under 240 lines for the seed study's data. `images`: the folder (relative to the
    file) holding each claim's figure as claim-<n>.png (`charts.save_png`); without it the figures are named, and
    notebook 08 draws them."""
    shown = verdicts(found).drop(columns="because").assign(
        figure=[f"[figure {i}](#{_anchor(_figure_heading(i))})" if i <= len(TITLES) else ""
                for i in range(1, len(found.claims) + 1)])
    lines = ["# Findings: the seed study on this data", "",
             f"Drawn by notebook 08 from {found.source}; every number below is computed from them (gain = normalized "
             "throughput, 1 = one job alone; ± is the 95 % CI). The tables behind the verdicts are in the appendix.",
             "", *([f"> {'; '.join(found.notes)}", ""] if found.notes else []),
             "## The verdicts", "", table(shown).to_markdown(), "", _tally(found.claims), "",
             *(f"**{i}. {c['verdict'].capitalize()}.** {because(found, i)}\n" for i, c in enumerate(found.claims, 1))]
    for i in range(1, min(len(found.claims), len(TITLES)) + 1):
        lines += [f"## {_figure_heading(i)}",
                  f"![{TITLES[i - 1]}]({images}/claim-{i}.png)" if images else "(drawn in notebook 08)", ""]
    lines += [*_fairness_section(found.fairness), *_prediction_section(found.errors),
              "## What a user of the study's A100-40GB should expect", "",
              a100_note(found.gpu), f"Copies that fit each card and its smallest MIG profiles: {_link('fit')}.", "",
              *_appendix(found)]
    return "\n".join(lines)


def _tally(claims: list[dict]) -> str:
    """The verdicts counted in one sentence: 'The data agrees with claims 2, 3 and 4 and disagrees with claim 1.'"""
    groups: dict[str, list[str]] = {}
    for i, claim in enumerate(claims, 1):
        groups.setdefault(claim["verdict"], []).append(str(i))
    said = {"agrees": "agrees with", "partly": "partly agrees with", "disagrees": "disagrees with",
            "cannot tell": "cannot decide", "not measured here": "holds no measurement for"}
    parts = [f"{said.get(verdict, verdict)} claim{'s' if len(n) > 1 else ''} "
             f"{', '.join(n[:-1]) + ' and ' + n[-1] if len(n) > 1 else n[0]}" for verdict, n in groups.items()]
    return "The data " + ("; it ".join(parts) or "holds no claim") + ". Why each verdict, by the rule that decided it:"


def _figure_heading(i: int) -> str:
    return f"Figure {TITLES[i - 1]}"


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: 'Figure 1. Gain, as run' -> 'figure-1-gain-as-run'."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _link(name: str) -> str:
    return f"table [{APPENDIX[name].split('.')[0]}](#{_anchor(APPENDIX[name])})"


def _fairness_section(found: dict | None) -> list[str]:
    """Who lost when jobs shared (`fairness.fairness_findings`) in a few lines; its tables are in the appendix."""
    if found is None:
        return []
    return ["## Fairness: who lost when jobs shared", "", FAIRNESS_TEXT, "", f"- {pretty(found['shows'])}.",
            *(f"- {e}" for e in grouped_fairness(found["evidence"])),
            f"- The least fair cells: {_link('fair')}; shares asked and had: {_link('shares')}.", ""]


def _prediction_section(errors: pd.DataFrame) -> list[str]:
    """What predicts a gain: the model's error per mode on this data's collocated cells (none: no section)."""
    if errors.empty:
        return []
    shown = errors.assign(median=[f"{100 * v:.1f} %" for v in errors["median"]],
                          p90=[f"{100 * v:.1f} %" for v in errors["p90"]])
    shown.columns = ["mode", "cells", "median error of the gain", "90th percentile"]
    return ["## What predicts a gain", "",
            "Each collocated cell of the shipped H100 sets (h100-80gb, h100-matrix) predicted from its lone runs alone "
            f"by `colloc_kit.predict.model`, against what it measured; the model's constants were fitted on "
            f"{predict_check.HOLD_OUT}, whose cells are not counted (the same errors as the README's and notebook "
            "09's, `predict.check.held_out_errors`). "
            "The model and its worst cells: [predict.md](predict.md); `colloc-kit advise` ranks configurations by it.",
            "", table(shown).to_markdown(), ""]


def _appendix(found: Report) -> list[str]:
    """Each claim's evidence (collapsed), then the tables B-F."""
    links = {name: f"[{APPENDIX[name].split('.')[0]}](#{_anchor(APPENDIX[name])})" for name in APPENDIX}
    lines = ["## Appendix: A. The evidence behind each verdict", ""]
    for i, claim in enumerate(found.claims, 1):
        evidence = grouped_evidence(claim["evidence"], links) + grouped(claim)
        lines += [f"<details><summary>{i}. {claim['claim']} ({len(evidence)} lines)</summary>", "",
                  *(f"- {e}" for e in evidence), "", "</details>", ""]
    lines += [f"### {APPENDIX['gains']}", "", _measured(found), "",
              _markdown(all_gains(found), None, "No shared cell measured."),
              "", f"### {APPENDIX['mixes']}", "",
              _markdown(mix_table(found.cells37), None, "No mixed run in the data."), "",
              f"### {APPENDIX['not-run']}", "",
              _markdown(not_run_table(all_missing(found), found.not_run), None, "Every cell of the study ran."), "",
              f"### {APPENDIX['fit']}", "", _markdown(fit_table(found.fit), None, "No steady footprint measured."), ""]
    refused = unplaceable(found.placements, [found.gpu, STUDY_GPU])
    placed = len(found.placements) - len(refused)
    lines += [f"### {APPENDIX['mig']}", "", f"{placed} of the study's {len(found.placements)} mixes have a MIG layout "
              f"on both cards (notebook 08 draws them); these cannot be placed:", "", _markdown(refused, None, "none."),
              ""]
    fair = found.fairness or {"least_fair": pd.DataFrame(), "shares": pd.DataFrame()}
    return lines + [f"### {APPENDIX['fair']}", "", _markdown(fair["least_fair"], None, "No cell shared."), "",
                    f"### {APPENDIX['shares']}", "", SHARES_TEXT, "",
                    *_shares(fair["shares"])]


def _shares(shares: pd.DataFrame) -> list[str]:
    """Table H's lines: the copies' shares by layout, then the mixes', one per mix."""
    copies, mixes = shares_by_layout(shares), mix_shares(shares)
    if copies.empty and mixes.empty:
        return ["No job was given a share.", ""]
    return ([_markdown(copies, None, ""), ""] if len(copies) else []) + \
        (["The mixes of experiment 37, each in its layout:", "", _markdown(mixes, None, ""), ""] if len(mixes) else [])


def _gain_sets(found: Report) -> list[tuple[str, pd.DataFrame]]:
    """(name, cells) of experiment 33 in each precision and of 34-36, as the gains table lists them."""
    sets = [("33", found.cells33)] + ([(f"33 {_precisions(found.variant33)}", found.variant33)]
                                      if len(found.variant33) else [])
    return sets + [(name.removeprefix("seed-"), cells) for name, cells in found.like33.items()]


def _measured(found: Report) -> str:
    """How many of each experiment's cells were measured, and the largest gain in another precision."""
    counts = ", ".join(f"{name}: {cells['normalized_throughput_mean'].notna().sum()}" for name, cells
                       in _gain_sets(found))
    said = f"Cells measured of the study's {len(STUDY_33) * 3} per experiment: {counts}."
    if len(found.variant33):
        said += " " + _versus_as_run(found.variant33, found.cells33)
    return said + " Experiments 34-36 are experiment 33's matrix for " + \
        "; ".join(f"{k.removeprefix('seed-')}: {v}" for k, v in LIKE_33.items()) + "."


def _markdown(frame: pd.DataFrame, columns: list[str] | None, nothing: str) -> str:
    return table(frame, columns).to_markdown() if len(frame) else nothing


def _versus_as_run(variant: pd.DataFrame, study: pd.DataFrame) -> str:
    """The largest gain of the variant's cells (e.g. bf16) beside the largest of the study's recipe."""
    best = [cells.loc[cells["normalized_throughput_mean"].idxmax()] if cells["normalized_throughput_mean"].notna().any()
            else None for cells in (variant[variant["kind"].isin(KINDS)], study[study["kind"].isin(KINDS)])]
    said = [f"{pretty(gain_text(b))} ({b['workloads']}, {int(b['copies'])} copies, {b['kind']})" if b is not None
            else "none measured" for b in best]
    return f"The largest gain in {_precisions(variant)}: {said[0]}; as the study ran it: {said[1]}."


def _precisions(cells: pd.DataFrame) -> str:
    return " and ".join(sorted(set(cells["amp"].dropna())))


def a100_note(gpu: str) -> str:
    """What a user of the study's A100-40GB should expect, from the two cards' tables.

    >>> a100_note("H100-80GB")[:60]
    'A100-40GB has 108 SMs and 40,960 MiB against 132 SMs and 81,'
    """
    here, there = gpu_model(gpu), gpu_model(STUDY_GPU)
    return (f"{there.name} has {there.sm_count} SMs and {there.total_memory_mib:,} MiB against {here.sm_count} SMs "
            f"and {here.total_memory_mib:,} MiB on {here.name}: a job that keeps this card's SMs busy alone keeps the "
            "smaller card busier still, so its copies gain no more there; a job that leaves SMs idle here (host- or "
            "input-bound) leaves them idle there too, and copies gain on both.")

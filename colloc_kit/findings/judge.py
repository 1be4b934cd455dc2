"""Judging the seed study's claims: each claim of the paper beside what the cells of `read.configurations` show,
with a verdict (agrees / partly / disagrees / cannot tell) and its evidence; and the yardsticks they are held to, the
card's memory capacities (`capacities`, for `analysis.memory_fit`) and the MIG placements of the study's mixes.

    >>> capacities("H100-80GB", with_study_gpu=False)["H100-80GB card"]
    81559.0
    >>> found = claims(cells33, cells37, mig_placements([gpu]), fit, gpu)   # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Iterator

import pandas as pd

from colloc_kit.analysis.results import Results
from colloc_kit.errors import BadInput
from colloc_kit.experiments import seed
from colloc_kit.findings.gain import judge_gain
from colloc_kit.findings.read import ALONE, KINDS, MPS, PARTITION, _copies, missing_cells
from colloc_kit.gpu.mig_catalogue import gpu_model
from colloc_kit.predict import check as predict_check

__all__ = ["STUDY_GPU", "GAIN_CLAIM", "SAME_SHAPES", "capacities", "mig_placements", "claims", "gain_text",
           "prediction_errors"]

STUDY_GPU = "A100-40GB"
GAIN_CLAIM = ("Collocating training runs yields up to three (EuroMLSys 2024) or four (arXiv v3) times the training "
              "throughput, despite longer epochs.")
SAME_SHAPES = 0.9  # claim 3: partitions "help" where equal copies on them train at least 0.9 x what MPS did


def capacities(gpu: str, with_study_gpu: bool = True) -> dict[str, float]:
    """Memory capacities to count copies against: the card and its MIG profiles (and the study's A100-40GB)."""
    out = {}
    models = [gpu_model(gpu)] + ([gpu_model(STUDY_GPU)] if with_study_gpu and gpu_model(gpu).name != STUDY_GPU else [])
    for model in models:
        out[f"{model.name} card"] = float(model.total_memory_mib)
        out.update({f"{model.name} {p.name}": float(p.memory_mib) for p in model.profiles
                    if not p.media_extensions and p.compute_slices in (1, 2, 3, 4)})
    return out


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


def claims(cells33: pd.DataFrame, cells37: pd.DataFrame, placements: pd.DataFrame, fit: pd.DataFrame,
           gpu: str, not_run: pd.DataFrame | None = None, variant33: pd.DataFrame | None = None) -> list[dict]:
    """Each claim of the paper with what the data shows, a verdict (agrees / partly / disagrees / cannot tell), the
    rule that decided it and the evidence, all computed from the frames given. `variant33`: experiment 33 in another
    precision (bf16), judged for claim 1 beside the study's recipe."""
    sets = [(_precision(cells33, "fp32"), cells33)]
    if variant33 is not None and len(variant33):
        sets.append((_precision(variant33, "another precision"), variant33))
    return [{"claim": GAIN_CLAIM, **judge_gain(sets)}, _claim_fit(cells33, fit, not_run, gpu),
            _claim_mig(cells33, cells37, placements, gpu),
            _claim_mps(cells33, cells37)]


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
        return _verdict(claim, "cannot tell", "no runs of experiment 33", evidence, "")
    rule = ("agrees where a cell ran out of memory or the workload whose lone job kept the SMs busiest gained least "
            "from copies; cannot tell otherwise")
    shows = "; ".join([
        f"{len(oom)} cell(s) did not fit in memory" if len(oom) else "every cell fit in memory",
        "the workload whose lone job kept the SMs busiest gained least from copies" if compute_binds else
        "the gains do not fall with the lone jobs' SM activity" if compute_binds is False else
        "no SM activity measured beside the gains"])
    return _verdict(claim, "agrees" if len(oom) or compute_binds else "cannot tell", shows, evidence, rule)


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
        return _verdict(claim, "cannot tell", shows, evidence, "")
    same, mixed = ratios
    counts = (len(_versus(cells33, PARTITION, MPS)), len(_versus(cells37, PARTITION, MPS)))
    compared = [f"{n} {what}{'' if n == 1 else plural}"
                for n, (what, plural) in zip(counts, (("copy cell", "s"), ("mix", "es"))) if n]
    shows = "; ".join(s for s in (
        f"equal copies on partitions trained {same:.2f} x what MPS did" if same is not None else None,
        f"mixes on partitions trained {mixed:.2f} x what MPS did" if mixed is not None else None,
        f"{len(unplaceable)} of the study's {len(placements)} mixes cannot be placed as MIG on {gpu}")
        if s)
    verdict = "agrees" if (mixed is None or mixed < 1) and (same is None or same >= SAME_SHAPES) else "partly"
    rule = (f"agrees where equal copies on partitions train at least {SAME_SHAPES} x what free MPS did (the shapes "
            f"cost little) and mixes on partitions less than MPS (rigid shapes leave the GPU under-used); partly "
            f"otherwise; from {' and '.join(compared)} with both, on MPS partitions shaped like MIG's")
    return _verdict(claim, verdict, shows + " (MPS partitions share SMs and memory bandwidth: no MIG isolation)",
                    evidence, rule)


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
        return _verdict(claim, "cannot tell", "no cell has MPS beside another way of sharing", [], "")
    wins = sum(tied for _, tied, *_ in outcomes)
    verdict = "agrees" if wins == len(outcomes) else "partly" if wins * 2 >= len(outcomes) else "disagrees"
    evidence = [f"{key}: MPS {lead}" + ("" if tied else f", behind {kind} {best}")
                for key, tied, kind, lead, best in outcomes]
    behind = [key for key, tied, *_ in outcomes if not tied]
    rule = ("agrees where MPS was best or within the 95 % CIs of the best in every cell that ran it beside another "
            "way of sharing, partly in at least half, disagrees otherwise"
            + (f"; behind in {', '.join(behind)}" if behind else ""))
    return _verdict(claim, verdict, f"MPS was best or within the CIs of the best in {wins} of {len(outcomes)} cells",
                    evidence, rule)


def _comparable(cells: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
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


def _verdict(claim: str, verdict: str, shows: str, evidence: list[str], rule: str) -> dict:
    return {"claim": claim, "verdict": verdict, "shows": shows, "evidence": evidence, "rule": rule}


def _precision(cells: pd.DataFrame, otherwise: str) -> str:
    """'fp32' for amp off, the amp's name (bf16) otherwise."""
    amps = sorted({"fp32" if a == "off" else a for a in cells["amp"].dropna()}) if "amp" in cells else []
    return " and ".join(amps) or otherwise


def gain_text(cell: pd.Series) -> str:
    """'2.31 +- 0.05 x' (95 % CI), '2.31 x (no CI)', or 'no baseline'."""
    mean, ci = cell["normalized_throughput_mean"], cell["normalized_throughput_ci"]
    if not _number(mean):
        return "no baseline"
    return f"{mean:.2f} +- {ci:.2f} x" if _number(ci) else f"{mean:.2f} x (no CI)"


def _number(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def prediction_errors(results: Results) -> pd.DataFrame:
    """Per mode, how well the collocation model (`colloc_kit.predict.model`) predicts the data's collocated cells from
    their lone runs alone: cells, median and 90th percentile of the absolute error of the gain, over the cells of
    every experiment but the one its constants were fitted on (`predict_check.HOLD_OUT`); cells the model does not
    cover are left out."""
    frames = []
    for cell in predict_check.cells(results) if len(results.runs) else []:
        try:
            frames.append(predict_check.validate([cell]))
        except BadInput:  # a cell the model does not cover (e.g. CPU jobs under a GPU mode): left out
            continue
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame(columns=["mode", "cells", "median", "p90"])
    held = frame[frame["held_out"] & frame["abs_error"].notna()]
    return pd.DataFrame([{"mode": mode, "cells": len(g), "median": g["abs_error"].median(),
                          "p90": g["abs_error"].quantile(0.9)} for mode, g in held.groupby("mode")])

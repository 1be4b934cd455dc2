"""Judging the seed study's claims: each claim of the paper beside what the cells of `read.configurations` show,
with a verdict (`verdict.VERDICTS`) by its rule, its scope, the cells that decided it and those set aside (claim 1 in
`gain`, claims 3 and 4 in `sharing`, claim 2 here: memory seen to run out, or compute by SM activity); and the
yardsticks they are held to, the card's memory capacities (`capacities`, for `analysis.memory_fit`) and the MIG
placements of the study's mixes.

    >>> capacities("H100-80GB", with_study_gpu=False)["H100-80GB card"]
    81559.0
    >>> found = claims(cells33, cells37, mig_placements([gpu]), fit, gpu)   # doctest: +SKIP
"""

from __future__ import annotations

import math

import pandas as pd

from colloc_kit.experiments import seed
from colloc_kit.findings.gain import judge_gain, short_name
from colloc_kit.findings.missing import OUT_OF_MEMORY, PREDICTED, _copies, missing_cells
from colloc_kit.findings.read import ALONE, KINDS, as_run
from colloc_kit.findings.sharing import judge_mig, judge_mps
from colloc_kit.findings.verdict import AGREES, CANNOT_TELL, Cell, Decision, ahead, verdict
from colloc_kit.gpu.mig_catalogue import gpu_model
from colloc_kit.predict import check as predict_check

__all__ = ["STUDY_GPU", "GAIN_CLAIM", "BUSIEST_LEAST", "capacities", "mig_placements", "claims", "gain_text",
           "prediction_errors"]

STUDY_GPU = "A100-40GB"
GAIN_CLAIM = ("Collocating training runs yields up to three (EuroMLSys 2024) or four (arXiv v3) times the training "
              "throughput, despite longer epochs.")


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
           gpu: str, not_run: pd.DataFrame | None = None, variant33: pd.DataFrame | None = None,
           like33: dict[str, pd.DataFrame] | None = None) -> list[dict]:
    """Each claim of the paper with what the data shows, a verdict (`verdict.VERDICTS`), the rule that decided it,
    its scope, the cells that decided it and those set aside, all computed from the frames given. `variant33`:
    experiment 33 in another precision (bf16), reported beside the study's recipe; `like33`: experiments 34-36, whose
    fp32 cells claims 1 and 4 judge beside 33's."""
    study = [as_run(cells)[0] for cells in (like33 or {}).values()]
    names = ["33", *(name.removeprefix("seed-") for name in (like33 or {}))]
    recipe = pd.concat([cells33, *study], ignore_index=True) if study else cells33
    scope = (f"experiments {_and(names)} as the study ran them (fp32)" if len(names) > 1 else
             "experiment 33 as the study ran it (fp32)")
    sets = [(scope, recipe)]
    if variant33 is not None and len(variant33):
        sets.append((f"experiment 33 in {_precision(variant33, 'another precision')}", variant33))
    return [{"claim": GAIN_CLAIM, **judge_gain(sets)}, _claim_fit(cells33, fit, not_run, gpu),
            judge_mig(recipe, cells37, placements, gpu), judge_mps(recipe, cells37, f"{scope} and 37's mixes")]


def _claim_fit(cells: pd.DataFrame, fit: pd.DataFrame, not_run: pd.DataFrame | None, gpu: str) -> dict:
    claim = "The collocated models' aggregate memory footprint and compute needs must fit the GPU."
    scope = "experiment 33 as the study ran it (fp32), its lone jobs' SM activity and its cells' memory"
    missing = missing_cells(cells, not_run, fit, gpu)
    oom = missing[missing["state"].str.startswith(OUT_OF_MEMORY)]
    predicted = missing[missing["state"].str.startswith(PREDICTED)]
    decided = [Decision((), f"{r.workload} {r.kind} x{r.copies}{' on ' + r.layout if r.layout else ''}: {r.state}")
               for r in oom.itertuples()]
    set_aside = [Decision((), f"{len(predicted)} cell(s) {PREDICTED} by the kit's check before running (table D): "
                              "not an observation, the check assumes the claim")] if len(predicted) else []
    compute, lines = _saturation(cells)
    evidence = lines + _fit_lines(fit)
    if cells.empty:
        return verdict(claim, CANNOT_TELL, "no runs of experiment 33", "", scope, evidence=evidence)
    said = AGREES if len(oom) or compute.outcome == BUSIEST_LEAST else CANNOT_TELL
    decided += [compute] if compute.cells else []
    shows = "; ".join([f"{len(oom)} cell(s) {OUT_OF_MEMORY} (observed)" if len(oom) else
                       f"no cell {OUT_OF_MEMORY}", compute.outcome])
    rule = (f"agrees where a cell's jobs {OUT_OF_MEMORY} (observed, not predicted) or where the workload whose lone "
            "job kept the SMs busiest gained least from copies, its best gain's 95 % CI below every other's; cannot "
            "tell otherwise")
    return verdict(claim, said, shows, rule, scope, decided, set_aside, evidence)


BUSIEST_LEAST = "the workload whose lone job kept the SMs busiest gained least"


def _saturation(cells: pd.DataFrame) -> tuple[Decision, list[str]]:
    """Whether the workload whose lone job kept the SMs busiest gained least from copies, beyond the CIs of the
    best gains (the decision names the busiest's best cell first, then the others'); and per workload a line of its
    SM activity beside its best gain."""
    rows = []
    for workload, group in cells.groupby("workloads", sort=True):
        alone = group[group["kind"] == ALONE]
        shared = group[group["kind"].isin(KINDS) & (group["copies"] > 1)].dropna(
            subset=["normalized_throughput_mean"])
        if len(alone) and len(shared) and _number(alone["sm_util_pct_mean"].iloc[0]):
            best = Cell.of(shared.loc[shared["normalized_throughput_mean"].idxmax()], short_name(workload))
            rows.append((float(alone["sm_util_pct_mean"].iloc[0]), best))
    lines = [f"{c.workload}: alone its SMs were {sm:.0f} % active; the best gain from copies was {c.text()}"
             for sm, c in rows]
    if len(rows) < 2:
        return Decision((), "fewer than two workloads with SM activity beside their gains"), lines
    busiest = max(rows, key=lambda r: r[0])[1]
    others = [c for _, c in rows if c is not busiest]
    more = [o.workload for o in others if ahead(busiest, o)]
    unclear = [o.workload for o in others if not ahead(o, busiest)]
    outcome = (BUSIEST_LEAST if not unclear else
               f"{busiest.workload}, whose lone job kept the SMs busiest, gained more than {_and(more)} beyond the CIs"
               if more else f"{busiest.workload}, whose lone job kept the SMs busiest, is within the CIs of "
               f"{_and(unclear)}: too imprecise to tell whether it gained least")
    return Decision((busiest, *others), outcome), lines


def _fit_lines(fit: pd.DataFrame) -> list[str]:
    """Copies that fit the card and its smallest MIG shares, by each workload's steady footprint alone."""
    known = fit.dropna(subset=["copies_fit"]) if len(fit) else fit
    if len(known):
        known = known[known["capacity"].str.endswith(" card") | known["capacity"].str.contains(" 1g.")]
    return [f"{r.workload}: {r.steady_gpu_memory_mb:,.0f} MiB steady alone; {_copies(r.copies_fit)} fit in "
            f"{r.capacity}" for r in known.itertuples()]


def _and(names: list[str]) -> str:
    """'33', '33 and 34', '33, 34 and 35'."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


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


def prediction_errors() -> pd.DataFrame:
    """Per mode, how well the collocation model (`colloc_kit.predict.model`) predicts a collocated cell from its lone
    runs alone: cells, median and 90th percentile of the absolute error of the gain over the held-out cells of the
    shipped H100 data (`predict_check.held_out_errors`: the one set the README and notebook 09 show too)."""
    return predict_check.held_out_errors()

"""The claims' rules held: for each claim, small made-up result sets on each side of its rule and on its edge give the
verdict the rule says; an undecidable cell that could change a verdict makes it "cannot tell" and is named, never
left out; predicted-not-to-fit is not ran-out-of-memory; MPS partitions never stand in for MIG; and no verdict, on the
made-up sets or the shipped H100 reference sets, names a cell whose figures contradict it (`contradictions`, checked
to fail on a forged verdict)."""

import math

import pandas as pd
import pytest
from shipped_findings import shipped_findings

from colloc_kit import findings
from colloc_kit.findings import MIG, MPS, NAIVE, PARTITION

PLACEMENTS = findings.mig_placements(["H100-80GB"])
NO_FIT = pd.DataFrame(columns=["workload", "capacity", "copies_fit", "steady_gpu_memory_mb", "capacity_mb"])
NAN = math.nan


def cell(workload: str, kind: str, copies: int, gain: float, ci: float, experiment: str = "seed-33", **more) -> dict:
    """One made-up cell as `findings.configurations` gives it (gains chosen by the test, not measured)."""
    return {"experiment": experiment, "workloads": workload, "kind": kind, "copies": copies, "layout": "",
            "mix": None, "normalized_throughput_mean": gain, "normalized_throughput_ci": ci, "amp": "off",
            "model": workload, "data": None, "sm_util_pct_mean": NAN, "failed_jobs_mean": 0.0,
            "out_of_memory_jobs_mean": 0.0, "jobs_mean": float(copies), "flags": "", "bound_by": "gpu"} | more


def cells(*rows: dict, sm: dict[str, float] | None = None) -> pd.DataFrame:
    """The rows, with a lone cell (gain 1) for each workload, its SMs `sm[workload]` % active."""
    workloads = dict.fromkeys((r["experiment"], r["workloads"], r["amp"]) for r in rows)
    alone = [cell(w, findings.ALONE, 1, 1.0, 0.01, e, amp=amp, sm_util_pct_mean=(sm or {}).get(w, NAN))
             for e, w, amp in workloads]
    return pd.DataFrame(alone + list(rows))


def judged(cells33: pd.DataFrame, cells37: pd.DataFrame | None = None, **more) -> list[dict]:
    empty = cells33.iloc[0:0]
    return findings.claims(cells33, empty if cells37 is None else cells37, PLACEMENTS, NO_FIT, "H100-80GB", **more)


def contradictions(claim: dict) -> list[str]:
    """The decisions of a verdict whose cells' own figures contradict it, by the claim's rule in words: claim 1's
    cells against 3x, claim 2's busiest workload against the others, claim 3's cells MIG (MPS partitions set
    aside), claim 4's MPS against the best other way. Empty where every named cell agrees with its verdict."""
    bad, said = [], claim["verdict"]
    for decision in claim["decided"]:
        cs, outcome = decision.cells, decision.outcome
        if claim["claim"] == findings.GAIN_CLAIM:
            (c,) = cs
            wrong = {"agrees": not (c.known and c.low >= 3), "disagrees": not (c.known and c.high < 3),
                     "cannot tell": c.known and (c.low >= 3 or c.high < 3)}[said]
        elif claim["claim"].startswith("The collocated models"):
            wrong = ("predicted" in outcome or (outcome == findings.BUSIEST_LEAST and
                                                not all(o.low > cs[0].high for o in cs[1:])))
        elif claim["claim"] == findings.MIG_CLAIM:
            wrong = said == findings.NOT_MEASURED or cs[0].kind != MIG or cs[1].kind != MPS
        else:
            mps, best = cs
            wrong = (mps.kind != MPS or (outcome == "MPS best" and mps.value < best.value)
                     or (outcome.startswith("MPS behind") and not best.low > mps.high)
                     or (outcome.startswith("MPS within") and (best.low > mps.high or mps.value >= best.value))
                     or (said == "agrees" and outcome.startswith("MPS behind")))
        if wrong:
            bad.append(f"{said}: {decision.text()}")
    if claim["claim"] == findings.MIG_CLAIM:
        bad += [d.text() for d in claim["set_aside"] if d.cells and d.cells[0].kind != PARTITION]
    return bad


@pytest.mark.parametrize("gains, verdict", [
    ([(2.5, 0.2)], "disagrees"),
    ([(3.5, 0.2)], "agrees"),
    ([(2.75, 0.25)], "cannot tell"),  # the edge: upper bound at 3x is not under it
    ([(3.25, 0.25)], "agrees"),  # the edge: lower bound at 3x clears it
    ([(2.0, 0.1), (1.84, 1.16)], "cannot tell"),  # an imprecise cell reaching 3x: never left out
    ([(2.0, 0.1), (2.2, NAN)], "cannot tell"),  # a cell without a CI could be either side
    ([(3.5, 0.1), (2.0, NAN)], "agrees"),  # ... unless it cannot change the verdict
])
def test_claim_1_follows_its_rule_on_each_side_and_on_its_edge(gains, verdict):
    rows = [cell(f"w{i}", MPS, 3, gain, ci) for i, (gain, ci) in enumerate(gains)]
    gain = judged(cells(*rows))[0]
    assert gain["verdict"] == verdict and contradictions(gain) == []
    if verdict == "cannot tell":  # the cells that could change it are the ones named
        assert [d.cells[0].value for d in gain["decided"]] == [g for g, ci in gains if math.isnan(ci) or g + ci >= 3]


def test_claim_1_judges_experiments_33_to_36_as_run_and_sets_bf16_aside():
    like34 = cells(cell("r26 bs32", MPS, 7, 3.4, 0.1, "seed-34"))
    bf16 = cells(cell("r26", MPS, 7, 3.6, 0.1, amp="bf16"))
    alone33 = cells(cell("r26", MPS, 7, 2.0, 0.1))
    assert judged(alone33, variant33=bf16)[0]["verdict"] == "disagrees"  # bf16 is reported beside, never decides
    gain = judged(alone33, variant33=bf16, like33={"seed-34": like34})[0]
    assert gain["verdict"] == "agrees" and gain["scope"] == "experiments 33 and 34 as the study ran them (fp32)"
    assert [d.text() for d in gain["decided"]] == ["seed-34 r26 bs32 MPS x7: 3.40 ± 0.10 x (reaches 3x)"]
    assert [d.outcome for d in gain["set_aside"]] == ["experiment 33 in bf16: reported beside, not the study's recipe"]


def test_claim_2_counts_memory_seen_to_run_out_not_the_kits_prediction():
    ran_out = cells(cell("r152", NAIVE, 7, NAN, NAN, failed_jobs_mean=7.0, out_of_memory_jobs_mean=7.0))
    fit = judged(ran_out)[1]
    assert fit["verdict"] == "agrees" and [d.outcome for d in fit["decided"]] == [
        "r152 naive x7: ran out of memory: 7 of 7 jobs"]
    ran = cells(cell("r152", NAIVE, 2, 1.2, 0.1))
    not_run = pd.DataFrame({"experiment": ["seed-33"], "cell": ["r152 naive x7"], "why": ["7 jobs need 90,000 MiB"]})
    fit = judged(ran, not_run=not_run)[1]
    assert fit["verdict"] == "cannot tell" and fit["decided"] == [] and contradictions(fit) == []
    assert "1 cell(s) not run, predicted not to fit by the kit's check before running" in fit["set_aside"][0].outcome


@pytest.mark.parametrize("busiest, other, verdict", [
    ((1.1, 0.05), (1.5, 0.05), "agrees"),  # the busiest gained least, CIs apart
    ((1.3, 0.1), (1.5, 0.1), "cannot tell"),  # the edge: CIs touch
    ((1.3, 0.1), (1.5, 0.5), "cannot tell"),  # an imprecise other workload cannot tell
    ((1.8, 0.05), (1.5, 0.05), "cannot tell"),  # the busiest gained more: the rule cannot agree
])
def test_claim_2_compute_by_the_busiest_workloads_gain_and_its_ci(busiest, other, verdict):
    rows = cells(cell("r152", MPS, 2, *busiest), cell("r26", MPS, 2, *other), sm={"r152": 95.0, "r26": 30.0})
    fit = judged(rows)[1]
    assert fit["verdict"] == verdict and contradictions(fit) == []
    (decision,) = fit["decided"]
    assert [c.workload for c in decision.cells] == ["r152", "r26"]


def mixes(*rows: tuple[str, float, float]) -> pd.DataFrame:
    """Made-up cells of experiment 37: one mix under each (kind, gain, CI)."""
    return pd.DataFrame([cell("r152 + r26", kind, 1, gain, ci, "seed-37", mix="R152 + R26 as 1+1")
                         for kind, gain, ci in rows])


@pytest.mark.parametrize("copies, mix, verdict", [
    ((1.8, 0.1), (1.3, 0.05), "agrees"),  # copies on MIG within MPS's CIs, the mix behind MPS
    ((1.4, 0.05), (1.6, 0.05), "disagrees"),  # copies behind, the mix not
    ((1.8, 0.1), (1.6, 0.05), "partly"),
    ((1.8, 0.1), (1.3, NAN), "cannot tell"),  # the mix without a CI could go either way
    ((1.8, 0.1), None, "cannot tell"),  # no mix on MIG: half the claim unmeasured
])
def test_claim_3_is_judged_on_mig_cells_against_mps(copies, mix, verdict):
    cells33 = cells(cell("r26", MIG, 2, *copies, layout="3g+3g"), cell("r26", MPS, 2, 1.85, 0.05))
    cells37 = mixes((MIG, *mix), (MPS, 1.6, 0.05)) if mix else None
    mig = judged(cells33, cells37)[2]
    assert mig["verdict"] == verdict and contradictions(mig) == []


def test_claim_3_is_not_measured_on_mps_partitions():
    cells33 = cells(cell("r26", PARTITION, 2, 1.8, 0.1, layout="3g+3g"), cell("r26", MPS, 2, 1.85, 0.05))
    mig = judged(cells33, mixes((PARTITION, 1.3, 0.05), (MPS, 1.6, 0.05)))[2]
    assert mig["verdict"] == findings.NOT_MEASURED and findings.NOT_MIG in mig["shows"] and mig["decided"] == []
    assert sorted(d.outcome for d in mig["set_aside"]) == ["MPS partition, not MIG: behind MPS beyond the CIs",
                                                           "MPS partition, not MIG: within the CIs of MPS"]


@pytest.mark.parametrize("others, verdict", [
    ([(1.5, 0.05), (1.5, 0.05), (1.5, 0.05)], "agrees"),
    ([(1.9, 0.05), (1.5, 0.05), (1.5, 0.05)], "partly"),  # behind in one of three
    ([(1.9, 0.05), (1.9, 0.05), (1.5, 0.05)], "disagrees"),  # behind in two of three
    ([(1.8, 0.05), (1.5, 0.05), (1.5, 0.05)], "agrees"),  # the edge: CIs touch, MPS within them
    ([(1.9, NAN), (1.9, 0.05), (1.5, 0.05)], "cannot tell"),  # partly or disagrees, by the cell without a CI
])
def test_claim_4_follows_its_rule_on_each_side_and_on_its_edge(others, verdict):
    rows = [row for i, (gain, ci) in enumerate(others) for row in (
        cell(f"w{i}", MPS, 2, 1.7, 0.05), cell(f"w{i}", PARTITION, 2, gain, ci, layout="3g+3g"))]
    mps = judged(cells(*rows))[3]
    assert mps["verdict"] == verdict and contradictions(mps) == []


def test_claim_4_says_its_scope_and_names_the_cell_that_decided_it():
    """Experiment 34's ResNet-50 bs32 x7, as the renewed H100 set has it: partitions 1.84 ± 0.05, MPS 1.74 ± 0.04."""
    like34 = cells(cell("r50 bs32", MPS, 7, 1.74, 0.04, "seed-34"),
                   cell("r50 bs32", PARTITION, 7, 1.84, 0.05, "seed-34"))
    rows = cells(cell("r26", MPS, 2, 1.8, 0.05), cell("r26", NAIVE, 2, 1.4, 0.05))
    mps = judged(rows, like33={"seed-34": like34})[3]
    assert mps["verdict"] == "partly" and mps["scope"].startswith("experiments 33 and 34 as the study ran them")
    assert [d.outcome for d in mps["decided"] if d.cells[0].experiment == "seed-34"] == [
        "MPS behind MPS partition (not MIG) beyond the CIs"]


def test_a_verdict_naming_a_cell_that_contradicts_it_is_caught():
    gain = judged(cells(cell("w", MPS, 3, 2.5, 0.2)))[0]
    spans = findings.Decision((findings.Cell("seed-33", "w", MPS, 3, 1.84, 1.16),), "stays below 3x")
    assert contradictions({**gain, "decided": [spans]}) == [
        "disagrees: seed-33 w MPS x3: 1.84 ± 1.16 x (stays below 3x)"]
    mps = judged(cells(cell("w", MPS, 2, 1.7, 0.05), cell("w", PARTITION, 2, 1.9, 0.05)))[3]
    assert contradictions({**mps, "verdict": "agrees"})  # agreeing while naming MPS behind


@pytest.mark.parametrize("data", ["h100-80gb", "h100-80gb-renewed"])
@pytest.mark.slow
def test_no_verdict_on_the_shipped_h100_sets_names_a_cell_that_contradicts_it(data):
    found = shipped_findings(data)
    assert {c["claim"]: contradictions(c) for c in found.claims} == {c["claim"]: [] for c in found.claims}
    assert all(c["scope"] and c["verdict"] in findings.VERDICTS for c in found.claims)
    assert found.claims[2]["verdict"] == findings.NOT_MEASURED  # no MIG on the lent H100s: partitions stand in

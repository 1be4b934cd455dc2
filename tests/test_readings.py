"""Readings true to their numbers: the sentences notebooks 02 and 06 print as their reading, rendered on several
result sets (the CPU seed set, the shipped H100 sets, and the cpu-smoke batch's own pages), each stated relation
(larger, smaller, within, more or less work than alone) read back from the text and checked against the numbers the
same text shows. Run with -s to see the list of relations checked per notebook and set."""

import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from colloc_kit import analysis, reference
from colloc_kit.notebook import readings

SETS = {"cpu-seed": Path(__file__).parent / "reference" / "cpu-seed", "h100-matrix": "h100-matrix",
        "h100-80gb": "h100-80gb", "h100-80gb-renewed": "h100-80gb-renewed"}
NUMBER = r"([\d,]+(?:\.\d+)?)"
COMPARED = re.compile(rf"\({NUMBER}[^)]*\) (is larger than|is smaller than|is within (\d+) % of) .*\({NUMBER}[^)]*\)$")
TOTAL = re.compile(rf": {NUMBER}x(?: ± {NUMBER})? in total, (more work than|less work than|the same work, within its "
                   r"CI, as|within 5 % of) the jobs one after another \(1\)$")
SHARES = re.compile(r"each job ran at (\d+)% to (\d+)% of its alone speed \((.*)\)$")


def value(text: str) -> float:
    return float(text.replace(",", ""))


def checked(line: str) -> str | None:
    """The relation `line` states, asserted against the numbers it shows (to their last digit shown); None where
    the line states none of the relations readings makes."""
    if match := COMPARED.search(line):
        left, words, within, right = value(match[1]), match[2], match[3], value(match[4])
        step = 10 ** -len(match[1].partition(".")[2])  # the rounding of the numbers shown
        if words == "is larger than":
            assert left > right * 1.05 - step, line
        elif words == "is smaller than":
            assert left < right * 0.95 + step, line
        else:
            assert abs(left - right) <= int(within) / 100 * right + step, line
        return words
    if match := TOTAL.search(line):
        total, ci, words = value(match[1]), value(match[2]) if match[2] else None, match[3]
        off, margin = total - 1, ci if ci is not None else 0.05
        expected = "within" if abs(off) <= margin else "more" if off > 0 else "less"
        said = {"more work than": "more", "less work than": "less"}.get(words, "within")
        assert said == expected or abs(abs(off) - margin) <= 0.01, line  # or on the edge, to the digits shown
        assert ci is not None or words != "the same work, within its CI, as", line
        return words
    if match := SHARES.search(line):
        low, high = int(match[1]), int(match[2])
        each = [int(p) for p in re.findall(r" (\d+)%(?:,|$)", match[3])]
        assert each and min(each) == low and max(each) == high, line
        return "range of shares"
    return None


def sentences_02(results) -> list[str]:
    done = analysis.complete(results.jobs)
    return [str(s) for s in readings.rate_by_batch(done) + readings.peak_against_steady(done)]


def sentences_06(results) -> list[str]:
    return [str(s) for s in readings.mix_totals(analysis.summarize(results))]


@pytest.fixture(scope="module")
def result_sets():
    return {name: reference.load(where) for name, where in SETS.items()}


@pytest.mark.slow
def test_every_relation_a_reading_states_holds_on_the_numbers_it_shows(result_sets):
    stated = {}
    for name, results in result_sets.items():
        for notebook, sentences in (("02", sentences_02(results)), ("06", sentences_06(results))):
            relations = [checked(line) for line in sentences]
            assert None not in relations, [s for s, r in zip(sentences, relations) if r is None]
            stated[(notebook, name)] = relations
            print(f"{notebook} on {name}: {len(relations)} relations checked: "
                  + ", ".join(f"{r} {relations.count(r)}" for r in sorted(set(relations))))
    # the sets hold cases of each kind: a reading that could only say one thing would not be tested here
    said = [r for relations in stated.values() for r in relations]
    assert {"is larger than", "is smaller than", "more work than"} <= set(said)
    assert stated[("02", "h100-matrix")].count("is smaller than") >= 4  # torch's peak under NVML's footprint


def test_peak_memory_is_said_larger_or_smaller_as_the_table_has_it():
    jobs = pd.DataFrame({"model": ["resnet18", "resnet26"], "batch_size": [64, 128], "copies": [1, 1],
                         "peak_memory_mb": [991.0, 12600.0], "steady_gpu_memory_mb": [1934.0, 10094.0]})
    lines = [str(s) for s in readings.peak_against_steady(jobs)]
    assert lines == ["resnet18 at batch 64: torch's peak (991 MB) is smaller than the steady footprint (1,934 MB)",
                     "resnet26 at batch 128: torch's peak (12,600 MB) is larger than the steady footprint (10,094 MB)"]
    assert readings.peak_against_steady(jobs.assign(steady_gpu_memory_mb=None)) == []  # a CPU: nothing to compare


def test_a_total_whose_ci_holds_one_is_not_called_a_gain():
    summary = pd.DataFrame({"mode": ["naive", "mps"], "mode_label": ["naive", "mps"],
                            "normalized_throughput_mean": [1.1, 1.75], "normalized_throughput_ci": [0.2, 0.1]})
    assert [str(s) for s in readings.mix_totals(summary)] == [
        "naive: 1.10x ± 0.20 in total, the same work, within its CI, as the jobs one after another (1)",
        "mps: 1.75x ± 0.10 in total, more work than the jobs one after another (1)"]


@pytest.mark.slow
def test_the_smoke_pages_of_02_and_06_state_only_relations_that_hold(smoke):
    for name in ("02_single_job_baseline", "06_mixed_workloads"):
        (outcome,) = [n for n in smoke.notebooks if n.name == name]
        lines = [line for cell in nbformat.read(smoke.folder / outcome.ipynb, as_version=4).cells
                 for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                 for line in o.get("text", "").splitlines()]
        relations = [r for r in map(checked, lines) if r]
        print(f"{name} on cpu-smoke: {len(relations)} relations checked")
        assert relations or any(line.startswith("No reading") for line in lines), name

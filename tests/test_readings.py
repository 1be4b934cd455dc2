"""Readings true to their numbers: the sentences notebooks 02-08 and 10 print as their reading, rendered on several
result sets (the CPU seed set, the shipped H100 sets, a GPU run (the gpu-quick batch's runs on an H100), every
built-in MIG table for 05, and the cpu-smoke batch's own pages), each stated relation (larger, smaller, within the
CIs, more or less work than alone, above or below the diagonal, nearer 1 or the copies, slices that add up, within or
over the latency target) read back from the text and checked against the numbers the same text shows. A line with a
comparative word and no relation read back fails. Run with -s to see the list of relations checked per notebook and
set."""

import re
import tarfile
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from shipped_findings import shipped_findings

import colloc_kit
from colloc_kit import analysis, findings, predict, reference
from colloc_kit.gpu import mig_catalogue, mig_planner
from colloc_kit.notebook import fits, gains, readings

SETS = {"cpu-seed": Path(__file__).parent / "reference" / "cpu-seed", "h100-matrix": "h100-matrix",
        "h100-80gb": "h100-80gb", "h100-80gb-renewed": "h100-80gb-renewed", "h200-141gb": "h200-141gb"}
GPU_RUN = Path(__file__).resolve().parents[1] / "benchmarks/results/h100/batch-gpu-quick/runs.tgz"  # a GPU run:
# the gpu-quick batch's own runs of 02, 03, 04 and 06 on an H100 (its README says how)
SEED_SETS = ("cpu-seed", "h100-80gb", "h100-80gb-renewed", "h200-141gb")  # with the seed study's experiments (08)
NUMBER = r"([\d,]+(?:\.\d+)?)"
COMPARED = re.compile(rf"\({NUMBER}[^)]*\) (is larger than|is smaller than|is within (\d+) % of) .*\({NUMBER}[^)]*\)$")
SHARES = re.compile(r"each job ran at (\d+)% to (\d+)% of its alone speed \((.*)\)$")
GAIN = rf"{NUMBER}x(?: ± {NUMBER})?"
TOTAL = re.compile(rf": {GAIN} in total, (more work than|less work than|the same work, within its CI, as|within 5 % "
                   r"of) (?:the jobs one after another|one job alone) \(1\)")
DIAGONAL = re.compile(rf"{GAIN} in total, .*?; each job's epoch {NUMBER}x as long: (above the diagonal|below the "
                      r"diagonal|on the diagonal, within the gain's CI|within 5 % of the diagonal)")
BETWEEN = re.compile(rf"\({GAIN}\) (is larger than|is smaller than|is within the CIs of|is within 5 % of) [^(]*"
                     rf"\({GAIN}\)(?:: (the gain still grows|past \d+ copies the gain falls|from \d+ to \d+ copies no "
                     r"change beyond the noise))?")
NEARER = re.compile(rf"{GAIN} of (\d+) cop(?:y|ies): (?:nearer (\d+) than (\d+)|midway between 1 and (\d+), within "
                    r"its CI)")
SLICES = re.compile(r"(\d+) of (\d+) (compute|memory) slices used \((none|\d+) idle\)")
TARGET = re.compile(rf"p99 {NUMBER} ms, (within|over) the {NUMBER}-ms target(?:, {NUMBER}x it)?")
BOUND = re.compile(r"Of (\d+) cells? that shared the card, bound by (.*)$")
MEDIAN = re.compile(rf"over (\d+) configurations? the median gain was {NUMBER}x, the highest {GAIN}")
COMPARATIVE = re.compile(r"\b(larger|smaller|more|less|within|above|below|nearer|faster|slower|meets?|grows|falls)\b")


def value(text: str) -> float:
    return float(text.replace(",", ""))


def step(text: str) -> float:
    """The rounding of a number as shown: 0.01 for '1.84'."""
    return 10 ** -len(text.partition(".")[2])


def optional(text: str | None) -> float | None:
    return value(text) if text else None


def checked_between(match: re.Match) -> str:
    """`(a ± ca) is larger than ... (b ± cb)`: past both CIs together (or 5 % of b without CIs), to the digits shown;
    a conclusion after it follows the relation."""
    left, left_ci, words, right, right_ci, then = (value(match[1]), optional(match[2]), match[3], value(match[4]),
                                                   optional(match[5]), match[6])
    cis = [c for c in (left_ci, right_ci) if c is not None]
    margin = sum(cis) if cis else 0.05 * right
    slack = step(match[1]) + step(match[4]) + sum(step(m) for m in (match[2], match[5]) if m)
    if words == "is larger than":
        assert left - right > margin - slack, match[0]
    elif words == "is smaller than":
        assert right - left > margin - slack, match[0]
    else:
        assert abs(left - right) <= margin + slack, match[0]
        assert (words == "is within the CIs of") == bool(cis), match[0]
    if then:
        expected = {"is larger than": "still grows", "is smaller than": "falls"}.get(words, "no change")
        assert expected in then, match[0]
    return {"is within the CIs of": "within the CIs", "is within 5 % of": "within 5 %"}.get(words, words)


def checked_line(line: str) -> list[str]:
    """Every relation `line` states, each asserted against the numbers it shows (to their last digit shown)."""
    said = []
    if match := BETWEEN.search(line):
        said.append(checked_between(match))
    elif match := COMPARED.search(line):
        left, words, within, right = value(match[1]), match[2], match[3], value(match[4])
        slack = step(match[1])
        if words == "is larger than":
            assert left > right * 1.05 - slack, line
        elif words == "is smaller than":
            assert left < right * 0.95 + slack, line
        else:
            assert abs(left - right) <= int(within) / 100 * right + slack, line
        said.append(words)
    if match := TOTAL.search(line):
        total, ci, words = value(match[1]), optional(match[2]), match[3]
        off, margin = total - 1, ci if ci is not None else 0.05
        expected = "within" if abs(off) <= margin else "more" if off > 0 else "less"
        stated = {"more work than": "more", "less work than": "less"}.get(words, "within")
        assert stated == expected or abs(abs(off) - margin) <= 0.01, line  # or on the edge, to the digits shown
        assert ci is not None or words != "the same work, within its CI, as", line
        said.append(words)
    if match := DIAGONAL.search(line):
        gain, ci, growth, words = value(match[1]), optional(match[2]), value(match[3]), match[4]
        margin = ci if ci is not None else 0.05 * growth
        slack = 0.01 + step(match[1])
        if words.startswith("above"):
            assert gain - growth > margin - slack, line
        elif words.startswith("below"):
            assert growth - gain > margin - slack, line
        else:
            assert abs(gain - growth) <= margin + slack, line
        said.append(" ".join(words.split()[:3]).rstrip(","))
    if match := NEARER.search(line):
        gain, ci, copies = value(match[1]), optional(match[2]) or 0.0, int(match[3])
        middle = (1 + copies) / 2
        if match[4]:
            near, far = int(match[4]), int(match[5])
            assert {near, far} == {1, copies} and abs(gain - near) < abs(gain - far), line
            assert abs(gain - middle) > ci - 0.01, line
            said.append(f"nearer {'1' if near == 1 else 'the copies'}")
        else:
            assert abs(gain - middle) <= ci + 0.01, line
            said.append("midway, within its CI")
    for match in SLICES.finditer(line):
        used, total, idle = int(match[1]), int(match[2]), 0 if match[4] == "none" else int(match[4])
        assert used <= total and used + idle == total, line
        said.append("slices used and idle add up")
    for match in TARGET.finditer(line):
        p99, words, target = value(match[1]), match[2], value(match[3])
        assert (p99 <= target) == (words == "within"), line
        if match[4]:
            assert abs(p99 / target - value(match[4])) <= 0.05 + step(match[4]), line
        said.append(f"{words} the target")
    if match := BOUND.search(line):
        counts = [int(n) for n in re.findall(r": (\d+)", match[2])]
        assert sum(counts) == int(match[1]), line
        said.append("bound-by counts add up")
    if match := MEDIAN.search(line):
        assert value(match[3]) >= value(match[2]), line
        said.append("highest at least the median")
    if match := SHARES.search(line):
        low, high = int(match[1]), int(match[2])
        each = [int(p) for p in re.findall(r" (\d+)%(?:,|$)", match[3])]
        assert each and min(each) == low and max(each) == high, line
        said.append("range of shares")
    if not said:  # a line that states a relation must be one the checks above read back
        assert not COMPARATIVE.search(line.split(";")[0]) or line.startswith("No reading"), line
    return said


def checked(line: str) -> str | None:
    """The first relation `line` states, checked (None where it states none); see `checked_line`."""
    relations = checked_line(line)
    return relations[0] if relations else None


def sentences_02(results) -> list[str]:
    done = analysis.complete(results.jobs)
    return [str(s) for s in readings.rate_by_batch(done) + readings.peak_against_steady(done)]


def sentences_06(summary) -> list[str]:
    return [str(s) for s in readings.mix_totals(summary)]


@pytest.fixture(scope="module")
def result_sets(tmp_path_factory):
    sets = {name: reference.load(where) for name, where in SETS.items()}
    folder = tmp_path_factory.mktemp("gpu-quick")
    with tarfile.open(GPU_RUN) as runs:
        runs.extractall(folder, filter="data")
    return {**sets, "h100-gpu-quick": colloc_kit.load(folder / "runs")}


@pytest.fixture(scope="module")
def summaries(result_sets):
    return {name: analysis.summarize(results) for name, results in result_sets.items()}


@pytest.mark.slow
def test_every_relation_a_reading_states_holds_on_the_numbers_it_shows(result_sets, summaries):
    stated = {}
    for name, results in result_sets.items():
        for notebook, sentences in (("02", sentences_02(results)), ("06", sentences_06(summaries[name]))):
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


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CALLS = {"02_single_job_baseline": ["readings.rate_by_batch(done)", "readings.peak_against_steady(done)"],
         "03_naive_collocation": ['gains.by_copies(summary, "naive")'],
         "04_mps_collocation": ["gains.partitions_against_free(summary)"],
         "05_mig_collocation": ["fits.mig_plans(", 'gains.by_copies(summary, "mig")'],
         "06_mixed_workloads": ["readings.mix_totals(summary)"],
         "07_analysis": ["gains.by_mode(together)"],
         "08_seed_reproduction": ["gains.seed_cells(found.cells33, findings.all_missing(found))"],
         "10_training_beside_inference": ["fits.slo_lines(table)", "fits.slo_lines(h200)"]}


def parameters(name: str) -> dict:
    """The values of a notebook's parameters cell, as a reader's run starts with them."""
    (cell,) = [c for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
               if "parameters" in c.metadata.get("tags", [])]
    values: dict = {}
    exec(cell.source, {}, values)
    return values


def sentences_03(summary) -> list[str]:
    return gains.by_copies(summary, "naive")


def sentences_04(summary) -> list[str]:
    return gains.partitions_against_free(summary)


def sentences_07(summary) -> list[str]:  # as the page selects: mixes run one after another are baselines
    return gains.by_mode(summary[~(summary["mode"].eq("exclusive") & summary["workloads"].astype(str).str.contains(
        " + ", regex=False))])


def sentences_08(where) -> list[str]:
    found = shipped_findings(str(where))
    return gains.seed_cells(found.cells33, findings.all_missing(found))


def sentences_05(card: str) -> list[str]:
    """05's reading on `card`, with the page's own layouts, impossible layouts and job memory needs."""
    given = parameters("05_mig_collocation")
    shape = mig_catalogue.gpu_model(card)
    plans = {"+".join(layout): mig_planner.plan(layout, shape) for layout in given["LAYOUTS"]}
    impossible = {}
    for layout in given["IMPOSSIBLE"]:
        with pytest.raises(mig_planner.ImpossibleLayout) as refused:
            mig_planner.plan(layout, shape)
        impossible["+".join(layout)] = refused.value
    proposals = mig_planner.propose_layouts(given["JOB_MEMORY_MB"], shape, limit=3)
    options = {f"option {i + 1} ({p.layout().replace(',', '+')})": p for i, p in enumerate(proposals)}
    return fits.mig_plans({**plans, **options}, impossible, shape)


def record(stated: dict, notebook: str, name: str, sentences: list[str]) -> None:
    assert not [line for line in sentences if "+-" in line or "(s)" in line]  # one format: ±, plurals
    relations = [r for line in sentences for r in checked_line(line)]
    stated[(notebook, name)] = relations
    print(f"{notebook} on {name}: {len(sentences)} lines, {len(relations)} relations checked"
          + (": " + ", ".join(f"{r} {relations.count(r)}" for r in sorted(set(relations))) if relations else ""))


@pytest.mark.slow  # six sets summarized and four findings reports: about 25 s
def test_the_readings_of_03_04_05_07_08_and_10_state_only_relations_that_hold(summaries):
    stated: dict = {}
    for name, summary in summaries.items():
        record(stated, "03", name, sentences_03(summary))
        record(stated, "04", name, sentences_04(summary))
        record(stated, "07", name, sentences_07(summary))
        if name in SEED_SETS:
            record(stated, "08", name, sentences_08(SETS[name]))
    for card, shape in mig_catalogue.GPU_MODELS.items():
        if shape.compute_slices == 7:  # the page's layouts are of a seven-slice card (7g)
            record(stated, "05", card, sentences_05(card))
    inference = predict.serve_advise.frontier(reference.load("h200-inference"))
    record(stated, "10", "h200-inference", fits.slo_lines(inference))
    record(stated, "10", "h200-inference, an 18-ms target", fits.slo_lines(inference.assign(slo_ms=18.0)))
    record(stated, "10", "h200-inference, a 12-ms target", fits.slo_lines(inference.assign(slo_ms=12.0)))
    said = {r for relations in stated.values() for r in relations}
    # each kind of relation occurs: a reading that could only say one thing would not be tested here
    assert {"is larger than", "is smaller than", "within the CIs", "more work than", "above the diagonal",
            "below the diagonal", "nearer 1", "midway, within its CI", "slices used and idle add up",
            "within the target", "over the target", "bound-by counts add up", "highest at least the median"} <= said
    assert stated[("03", "h100-80gb-renewed")] and stated[("04", "h100-80gb-renewed")]
    assert all(stated[(n, "h100-gpu-quick")] for n in ("03", "04", "07"))  # the GPU run's pages read too
    assert stated[("05", "H200-141GB")] and stated[("08", "h100-80gb-renewed")] and stated[("08", "h200-141gb")]


def test_the_latency_reading_counts_the_settings_the_table_has_and_says_why_none_met():
    table = predict.serve_advise.frontier(reference.load("h200-inference"))
    for target in (12.0, 20.0, 25.0):  # none met, some met (alone over it for one model, within for the other), most
        lines = fits.slo_lines(table.assign(slo_ms=target))
        for (served, rate), rows in table[table["shared"]].groupby(["served", "rate_per_s"]):
            within = int((rows["latency_p99_ms"] <= target).sum())
            head = f"{served} at {rate:g} requests/s"
            assert any(line.startswith(f"{head} beside training: {within} of {len(rows)} settings kept")
                       for line in lines), (head, lines)
            alone = table[(table["served"] == served) & (table["rate_per_s"] == rate) & ~table["shared"]]
            why = f"{head}: alone at this rate it missed the target too"
            assert any(line.startswith(why) for line in lines) == (
                within == 0 and bool((alone["latency_p99_ms"] > target).all())), (head, target)
    assert all("+50+50+50" not in line for line in fits.slo_lines(table))  # one share per job of the setting
    whys = {target: sum("missed the target too" in line for line in fits.slo_lines(table.assign(slo_ms=target)))
            for target in (12.0, 20.0, 25.0)}
    assert whys == {12.0: 2, 20.0: 0, 25.0: 0}  # both ways of the rule are exercised by the set


def test_notebook_10s_reading_of_the_h200_set_says_what_the_set_measured():
    """What the page reads at the set's own 25-ms SLO, each setting's p99 the geometric mean of its three launches:
    beside two ResNet-50 trainers, ResNet-50 served missed it under naive and MPS, ViT-B/16 under naive; each model's
    most training within it is beside two trainers, ResNet-50's with a launch over the target, said."""
    table = predict.serve_advise.frontier(reference.load("h200-inference"))
    lines = fits.slo_lines(table)
    shared = table[table["shared"]]
    assert len(lines) == 4 and len(shared) == 24 and (table["launches"] == 3).all()
    over = shared[shared["latency_p99_ms"] > 25]
    assert sorted(zip(over["served"], over["mix"], over["mode_label"])) == [
        ("resnet50", "resnet50 x2", "mps"), ("resnet50", "resnet50 x2", "naive"),
        ("vit_b_16", "resnet50 x2", "naive")]
    assert lines[0].startswith("resnet50 at 38.5 requests/s, alone (the lone run before resnet50 x1, exclusive): p99 ")
    assert lines[0].endswith(", within the 25-ms target")
    assert lines[1].startswith("resnet50 at 38.5 requests/s beside training: 10 of 12 settings kept the p99 within "
                               "the target; the most training among them, ")
    assert "(resnet50 x2, MPS, training at 50 %)" in lines[1]  # the setting as the table and the legend name it
    assert lines[1].endswith("(the geometric mean of 3 launches; 2 of them met it)")  # one launch at 36.6 ms
    assert lines[3].startswith("vit_b_16 at 42.6 requests/s beside training: 11 of 12 settings kept")
    assert "(resnet50 x2, MPS)" in lines[3] and lines[3].endswith("3 of them met it)")


def test_the_gain_at_the_most_copies_falls_or_grows_only_past_both_cis():
    summary = pd.DataFrame({"experiment": "e", "mode": "naive", "mode_label": "naive", "copies": [2, 4, 7],
                            "workloads": "w", "normalized_throughput_mean": [1.50, 1.80, 1.60],
                            "normalized_throughput_ci": [0.10, 0.10, 0.15], "epoch_time_growth_mean": [1.3, 2.2, 4.4],
                            "bound_by": "gpu"})
    assert gains.by_copies(summary, "naive")[-1] == (
        "w: the gain at x7 (1.60x ± 0.15) is within the CIs of that at x4 (1.80x ± 0.10): from 4 to 7 copies no "
        "change beyond the noise")
    falls = summary.assign(normalized_throughput_mean=[1.50, 1.80, 1.40])
    assert gains.by_copies(falls, "naive")[-1].endswith("past 4 copies the gain falls")
    grows = summary.assign(normalized_throughput_mean=[1.50, 1.80, 2.20])
    assert gains.by_copies(grows, "naive")[-1] == (
        "w: the gain at x7 (2.20x ± 0.15) is larger than that at x4 (1.80x ± 0.10): the gain still grows at the most "
        "copies measured")
    no_ci = summary.assign(normalized_throughput_ci=None)
    assert "within 5 % of one job alone" not in "".join(gains.by_copies(no_ci, "naive"))
    assert all(checked_line(line) for line in gains.by_copies(no_ci, "naive"))


def test_a_page_without_its_data_reads_nothing_rather_than_failing():
    assert gains.seed_cells(pd.DataFrame(), pd.DataFrame()) == []
    assert gains.by_copies(pd.DataFrame(), "naive") == gains.partitions_against_free(pd.DataFrame()) == []
    assert gains.by_mode(pd.DataFrame()) == [] and fits.slo_lines(pd.DataFrame()) == []


def test_each_page_prints_its_reading_from_the_reading_functions():
    for name, calls in CALLS.items():
        source = "".join(c.source for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
                         if c.cell_type == "code")
        assert all(call in source for call in calls), name


def reading_lines(folder: Path, ipynb: str) -> list[str]:
    """The printed lines of a page's reading cells (those that call `notebook.readings.show`)."""
    return [line for cell in nbformat.read(folder / ipynb, as_version=4).cells
            if "notebook.readings.show(" in cell.get("source", "")
            for o in cell.get("outputs", []) if o.get("output_type") == "stream"
            for line in o.get("text", "").splitlines()]


@pytest.mark.slow
def test_the_smoke_pages_state_only_relations_that_hold(smoke):
    for name in CALLS:
        (outcome,) = [n for n in smoke.notebooks if n.name == name]
        lines = reading_lines(smoke.folder, outcome.ipynb)
        relations = [r for line in lines for r in checked_line(line)]
        print(f"{name} on cpu-smoke: {len(lines)} lines, {len(relations)} relations checked")
        assert relations or any(line.startswith("No reading") for line in lines), (name, lines)

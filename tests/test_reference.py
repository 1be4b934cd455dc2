"""Reference sets: an exported set reads back as the Results `load()` gives for the raw runs (every analysis figure
identical), its per-run monitor summaries carry GPM and energy, bad input is refused before anything is written,
notebooks fall back to a shipped set with one line, and a wheel installs the sets."""

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

import colloc_kit
from colloc_kit import findings, reference
from colloc_kit.analysis import summaries as analysis
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput
from colloc_kit.store.manifest import Manifest
from colloc_kit.store.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
MATRIX_RUNS = ROOT / "benchmarks" / "results" / "h100" / "matrix" / "runs.tgz"  # the raw runs of the set h100-matrix
COURSE_SET = "h100-matrix"  # what the course sheets read
TEST_SET = Path(__file__).with_name("reference") / "cpu-seed"  # a CPU stand-in (tests/make_reference_runs.py)
JOB = {"model": "smallcnn", "device": "cpu", "batch_size": 8, "image_size": 32, "synthetic_samples": 64, "steps": 16,
       "warmup_steps": 3, "workers": 0, "interval_s": 0.25}


@pytest.fixture(scope="module")
def raw_runs(tmp_path_factory):
    """Real CPU runs (real worker processes): the baseline alone, twice, then 2 copies naive, twice."""
    out = tmp_path_factory.mktemp("runs")
    colloc_kit.run([JOB], mode="exclusive", copies=1, repeats=2, out=out, name="seed-33", progress=False)
    colloc_kit.run([JOB], mode="naive", copies=2, repeats=2, out=out, name="seed-33", progress=False)
    return out / "seed-33"


@pytest.mark.slow
def test_an_exported_set_gives_the_frames_and_figures_of_the_raw_runs(raw_runs, tmp_path):
    raw = colloc_kit.load(raw_runs)
    folder = reference.export(raw_runs, "cpu-test", {"commands": ["pytest"]}, root=tmp_path)
    shipped = reference.load(folder)
    for table in reference.TABLES:
        pd.testing.assert_frame_equal(getattr(shipped, table), getattr(raw, table))
    summary = analysis.summarize(shipped)
    pd.testing.assert_frame_equal(summary, analysis.summarize(raw))
    pd.testing.assert_frame_equal(analysis.with_baselines(shipped.jobs), analysis.with_baselines(raw.jobs))
    pd.testing.assert_frame_equal(analysis.run_summary(shipped), analysis.run_summary(raw))
    naive = summary[summary["mode"] == "naive"].iloc[0]
    assert naive["repeats"] == 2 and naive["normalized_throughput_ci"] > 0 and naive["bound_by"] == "cpu"
    assert shipped.samples.empty and sorted(p.name for p in folder.iterdir()) == \
        ["README.md", "epochs.parquet", "jobs.parquet", "monitor.parquet", "not_run.parquet", "runs.parquet"]


@pytest.mark.slow
def test_export_from_results_in_memory_equals_export_from_folders(raw_runs, tmp_path):
    from_folder = reference.load(reference.export(raw_runs, "a", root=tmp_path))
    from_memory = reference.load(reference.export(colloc_kit.load(raw_runs), "b", root=tmp_path))
    pd.testing.assert_frame_equal(from_memory.runs, from_folder.runs)
    assert reference.available(tmp_path) == ["a", "b"]


@pytest.mark.slow
def test_the_readme_says_where_when_how_and_what_was_left_out(raw_runs, tmp_path):
    facts = {"commands": ["colloc-kit run seed-33 --out runs"], "left out": "experiment 35 (no time)"}
    text = (reference.export(raw_runs, "cpu-test", facts, root=tmp_path) / "README.md").read_text()
    for expected in ("- colloc-kit run seed-33 --out runs", "- experiment 35 (no time)", "## Where and when",
                     f"{JOB['model']}", "| seed-33 | naive | 2 | 2 x smallcnn bs8 | 2 | 2 |", "torch ",
                     "raw monitor series"):
        assert expected in text, expected
    assert text.count("## Left out") == 1


@pytest.mark.slow
def test_cells_an_experiment_did_not_run_travel_with_the_set(raw_runs, tmp_path):
    experiment = tmp_path / "seed-33"
    shutil.copytree(raw_runs, experiment)
    why = "7 jobs need 90,000 MiB (each its steady footprint alone); the GPU has 81,559 MiB, 5% kept free"
    (experiment / "not-run.json").write_text(json.dumps({"timm.resnet152 naive x7": why}))
    folder = reference.export(experiment, "with-gaps", root=tmp_path / "sets")
    assert reference.not_run(folder).to_dict("records") == [{"experiment": "seed-33", "cell": "timm.resnet152 naive x7",
                                                             "why": why}]
    assert f"- seed-33: timm.resnet152 naive x7 was not run: {why}" in (folder / "README.md").read_text()
    assert reference.not_run(reference.export(raw_runs, "none", root=tmp_path / "sets")).empty


def _stand_in_run(root, rate, power_w, sm_pct):
    """A hand-made run of two jobs (events written by the test, not a worker) with GPU samples every 0.5 s from
    t=100 to 112: power and SM activity constant, the energy counter rising with the power."""
    run = RunDir.create(root, "exp", "naive-x2-r0")
    run.jobs_dir.mkdir()
    entries = []
    for job in ("a", "b"):
        events = [{"type": "start", "job": job, "t": 100.0}, {"type": "interval", "job": job, "t": 101.0,
                  "interval_s": 1.0, "interval_images": 10, "warmup": True, "step": 0, "images": 0}]
        events += [{"type": "interval", "job": job, "t": 101.0 + k, "interval_s": 1.0, "interval_images": rate,
                    "warmup": False, "step": 0, "images": 0} for k in range(1, 11)]
        events.append({"type": "end", "job": job, "t": 111.0, "status": "complete", "images_per_s": rate,
                       "steady_s": 10.0, "steady_images": rate * 10})
        run.events_path(job).write_text("".join(json.dumps(e) + "\n" for e in events))
        spec = {"model": "resnet18", "dataset": "synthetic", "batch_size": 64, "amp": "bf16", "device": "cuda"}
        entries.append({"job": job, "group": 0, "outcome": None, "spec": spec})
    run.write_manifest(Manifest.from_dict({"run_id": run.run_id, "experiment": "exp", "status": "complete",
                                           "copies": 2, "repeat": 0, "mode": {"name": "mps", "label": "mps"},
                                           "sequential": False, "jobs": entries}))
    t = [100.0 + 0.5 * i for i in range(25)]
    run.monitor_dir.mkdir()
    samples = pd.DataFrame({"t": t, "gpu": 0, "power_w": power_w, "sm_util_pct": sm_pct,
                            "energy_mj": [1e6 + power_w * 1000 * (x - 100) for x in t]})
    samples.to_parquet(run.monitor_dir / "samples_gpu.parquet")
    return run


def test_per_run_monitor_summaries_carry_gpm_and_energy_over_the_common_window(tmp_path):
    _stand_in_run(tmp_path / "runs", rate=100, power_w=300.0, sm_pct=80.0)
    folder = reference.export(tmp_path / "runs", "gpu-like", root=tmp_path / "sets")
    (row,) = reference.monitor(folder).to_dict("records")
    assert row["monitor_window"] == "common window" and row["monitor_window_s"] == pytest.approx(10.0)
    assert row["sm_util_pct_mean"] == pytest.approx(80.0) and row["avg_power_w"] == pytest.approx(300.0)
    assert row["energy_j"] == pytest.approx(3000.0)  # 300 W over the 10 s window [101, 111]
    jobs = reference.load(folder).jobs
    assert jobs["energy_per_image_j"].iloc[0] == pytest.approx(3000.0 / 2000)  # 2 jobs x 100 images/s x 10 s


@pytest.mark.parametrize("name, source, message", [
    ("../escape", "runs", "reference set name '../escape'"),
    ("ok", "missing", "does not exist"),
    ("ok", "empty", "no runs to export"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, name, source, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "runs").mkdir()
    with pytest.raises(BadInput, match=message.replace("(", r"\(")):
        reference.export(tmp_path / source, name, root=tmp_path / "sets")
    assert not (tmp_path / "sets").exists() or not any((tmp_path / "sets").iterdir())


def test_runs_with_empty_manifests_are_named_not_called_no_runs(tmp_path, capsys):
    """Before: `reference export` of runs whose manifests are empty said only "no runs to export" (issue 53)."""
    runs = [tmp_path / "exp" / f"20261128-11532{i}-naive-x1-r0" for i in range(2)]
    for run in runs:
        run.mkdir(parents=True)
        (run / "manifest.json").write_text("")
    assert main(["reference", "export", str(tmp_path / "exp"), "--name", "x", "--to", str(tmp_path / "sets")]) == 2
    err = capsys.readouterr().err
    assert all(f"reference export: skipped the broken run {run}: {run / 'manifest.json'}" in err for run in runs)
    assert f"no readable runs to export in {tmp_path / 'exp'}: every run there is broken (named above)" in err
    assert not (tmp_path / "sets" / "x").exists()


def test_an_unknown_set_is_named_with_the_shipped_ones():
    with pytest.raises(BadInput, match="no reference set 'nope': the shipped sets are .*export"):
        reference.load("nope")


@pytest.mark.slow
def test_cli_exports_lists_and_refuses_bad_facts(raw_runs, tmp_path, capsys):
    code = main(["reference", "export", str(raw_runs), "--name", "cli-set", "--to", str(tmp_path),
                 "--fact", "commands=colloc-kit run seed-33", "--fact", "commands=colloc-kit reference export"])
    assert code == 0 and "written to" in capsys.readouterr().out
    assert "- colloc-kit reference export" in (tmp_path / "cli-set" / "README.md").read_text()
    assert main(["reference", "export", str(raw_runs), "--name", "x", "--to", str(tmp_path), "--fact", "nokey"]) == 2
    assert "--fact takes KEY=TEXT" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["reference", "list"]) == 0


@pytest.mark.slow
def test_notebooks_fall_back_to_the_shipped_set_and_say_so_in_one_line(raw_runs, tmp_path, monkeypatch):
    local, note = reference.local_or_reference(raw_runs.parent)
    assert len(local.runs) == 4 and note.startswith("4 runs")
    monkeypatch.setattr(reference, "SHIPPED", tmp_path / "none")
    empty, note = reference.local_or_reference(tmp_path / "nothing-here")
    assert empty.runs.empty and note.startswith("no runs in") and "no shipped reference data" in note
    shutil.copytree(TEST_SET, tmp_path / "shipped" / reference.DEFAULT)
    monkeypatch.setattr(reference, "SHIPPED", tmp_path / "shipped")
    shown, note = reference.local_or_reference(tmp_path / "nothing-here")
    assert note.startswith(f"no runs in {tmp_path / 'nothing-here'}: showing the shipped H100 reference data")
    assert "\n" not in note and len(shown.runs) == len(reference.load(TEST_SET).runs)


@pytest.mark.slow
def test_a_wheel_installs_the_reference_sets(tmp_path):
    """Build a wheel of a copy of this checkout with a set in the package's reference folder (pip)."""
    tree = tmp_path / "src"
    shutil.copytree(ROOT / "colloc_kit", tree / "colloc_kit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(TEST_SET, tree / "colloc_kit" / "reference" / "some-set")
    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []  # else pip fetches it
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q", "-w", str(tmp_path / "dist"),
                    str(tree)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for file in TEST_SET.iterdir():
        assert f"colloc_kit/reference/some-set/{file.name}" in names
    read = {"h100-80gb", "h100-80gb-renewed", "h200-141gb", "h200-inference", COURSE_SET}  # the notebooks, sheets, docs
    assert read <= set(reference.available())
    for name in reference.available():
        for file in reference.folder(name).iterdir():
            assert f"colloc_kit/reference/{name}/{file.name}" in names
    assert "colloc_kit/reference/__init__.py" in names and "colloc_kit/cli/reference.py" in names


@pytest.mark.skipif(reference.DEFAULT not in reference.available(),
                    reason=f"the H100 set ({reference.DEFAULT}) is not in colloc_kit/reference/ yet")
@pytest.mark.slow
def test_the_shipped_h100_set_explains_every_cell_and_carries_cis_gpm_and_energy():
    shipped, not_run = reference.load(), reference.not_run()
    assert {"seed-33", "seed-34", "seed-37"} <= set(shipped.runs["experiment"])  # 35 and 36 in part
    mixes, _ = findings.configurations(shipped, "seed-37")
    collocated = mixes[mixes["kind"] != findings.ALONE]
    assert {"naive", "MPS", "MPS partition (not MIG)"} <= set(collocated["kind"])
    assert collocated[["normalized_throughput_mean", "normalized_throughput_ci"]].notna().all().all()
    gpu = findings.gpu_of(shipped, "")
    for experiment, batch in (("seed-33", 128), ("seed-34", 32)):
        cells, _ = findings.configurations(shipped, experiment)
        assert set(cells["batch_size"]) == {batch}
        fit = analysis.memory_fit(shipped.of_experiments([experiment]).jobs, findings.capacities(gpu))
        for precision in findings.as_run(cells) if experiment == "seed-33" else (cells,):  # fp32, and bf16 for 33
            assert precision["workloads"].nunique() == 3, precision["workloads"].unique()
            missing = findings.missing_cells(precision, not_run, fit, gpu)  # not run: why (memory, not_run.parquet)
            assert (missing["state"] != "not run").all(), missing[missing["state"] == "not run"]  # run, or why not
            ran = precision[precision["kind"] != findings.ALONE]
            assert ran["normalized_throughput_mean"].notna().all() and ran["normalized_throughput_ci"].notna().all()
            assert len(precision) + len(missing) == len(findings.STUDY_33) * 3  # every cell of the study, once
    jobs = shipped.jobs[shipped.jobs["status"] == "complete"]
    for column in ("sm_util_pct_mean", "sm_occupancy_pct_mean", "dram_bw_util_pct_mean", "energy_per_image_j",
                   "steady_gpu_memory_mb"):
        assert jobs[column].notna().all(), column
    assert reference.monitor()["energy_j"].notna().any()
    assert sum(p.stat().st_size for p in reference.folder(reference.DEFAULT).iterdir()) < 10 * 2**20


@pytest.fixture(scope="module")
def matrix_runs(tmp_path_factory):
    """The raw runs of h100-matrix, unpacked from their archive (members runs/EXPERIMENT/RUN/...)."""
    target = tmp_path_factory.mktemp("h100-matrix")
    shutil.unpack_archive(MATRIX_RUNS, target, filter="data")
    return target / "runs"


@pytest.mark.slow
def test_the_course_set_gives_the_figures_of_its_raw_h100_runs(matrix_runs):
    """The shipped h100-matrix is the matrix runs in benchmarks/, exported: every figure the sheets show agrees."""
    shipped, raw = reference.load(COURSE_SET), colloc_kit.load(matrix_runs)
    figures = ["workloads", "mode_label", "copies", "aggregate_images_per_s_mean", "aggregate_images_per_s_ci",
               "normalized_throughput_mean", "normalized_throughput_ci", "epoch_time_growth_mean"]
    summaries = [analysis.summarize(r, reference=r.of_experiments(["single-job"]).jobs)[figures]
                 for r in (shipped, raw)]
    pd.testing.assert_frame_equal(*summaries)
    pairs = summaries[0][summaries[0]["copies"] == 2]
    assert set(pairs["mode_label"]) == {"naive", "mps"} and len(pairs) == 8  # 2 models x 2 batch sizes x 2 modes
    assert pairs[["normalized_throughput_mean", "normalized_throughput_ci"]].notna().all().all()
    alone = analysis.baselines(shipped.of_experiments(["single-job"]).jobs)
    assert sorted(zip(alone["model"], alone["batch_size"])) == [("resnet18", 64), ("resnet18", 128),
                                                                ("resnet50", 64), ("resnet50", 128)]
    assert sum(p.stat().st_size for p in reference.folder(COURSE_SET).iterdir()) < 2**20  # no raw series


@pytest.mark.slow
def test_the_readme_names_the_machine_of_runs_that_hold_it_in_their_manifest(matrix_runs):
    """Runs written before machine descriptions (the H100 matrix) keep theirs inline in the manifest."""
    runs = colloc_kit.load(matrix_runs / "single-job").runs
    (line,) = set(reference.machines(runs[runs["run_id"].str.startswith("20261121-0025")]))
    assert line.startswith("vm: Intel(R) Xeon(R) Processor, 16 cores, 128,888 MiB; NVIDIA H100 80GB HBM3 (81,559 MiB), "
                           "driver 580.159.04, CUDA 13.0; python 3.12.3")


@pytest.mark.parametrize("name", [123, None, ["h100-80gb"]])
def test_a_set_named_by_something_that_is_no_name_or_path_is_refused_in_words(name):
    """Before: `reference.load(123)` ended in a TypeError traceback (issue 53)."""
    with pytest.raises(BadInput, match="a reference set is a name .* or a folder path, got"):
        reference.load(name)

"""Every path the kit takes from a user is made absolute where it enters, so a relative one works from any folder: each
command family run with relative paths from a folder that is neither the checkout nor the output's parent (`work/`,
beside `data/`, `notebooks/` and `results/`). On 33236c3 `colloc-kit batch` with a relative --out failed every
notebook: papermill's kernel opened the batch's log by a relative path after it had moved into the batch folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import colloc_kit
from colloc_kit.cli.export import _source
from colloc_kit.notebook.panel import ExperimentPanel

ROOT = Path(__file__).resolve().parents[1]
KIT = [sys.executable, "-c", "import sys; from colloc_kit.cli.command import main; sys.exit(main())"]
TINY = ["--model", "smallcnn", "--device", "cpu", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
        "--batch-size", "8", "--workers", "0", "--no-monitor", "--quiet"]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """`tmp/work`, the folder the user stands in; what they name lies beside it (`../results`, ...)."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "work"


def kit(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([*KIT, *argv], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.mark.slow
def test_batch_with_a_relative_out_and_notebooks_folder_runs_its_notebook(work):
    notebooks = os.path.relpath(ROOT / "notebooks", work)
    kit("batch", "--profile", "cpu-smoke", "--only", "01", "--notebooks", notebooks, "--out", "../results/b", cwd=work)
    (folder,) = (work.parent / "results" / "b").iterdir()
    record = json.loads((folder / "batch.json").read_text())
    assert [(n["name"], n["status"]) for n in record["notebooks"]] == [("01_gpu_tour", "ok")]
    assert (folder / "kernels.stderr.log").is_file() and (folder / "01_gpu_tour.html").is_file()


@pytest.mark.slow
def test_run_show_and_status_with_relative_data_and_results_folders(work):
    kit("data", "make", "cifar10", "--root", "../data", "--images", "20", "--quiet", cwd=work)
    kit("run", *TINY, "--dataset", "imagefolder", "--data-root", "../data/cifar10", "--out", "../results/runs",
        "--name", "rel", cwd=work)
    (manifest,) = (work.parent / "results" / "runs" / "rel").glob("*/manifest.json")
    recorded = json.loads(manifest.read_text())
    assert recorded["status"] == "complete", recorded
    assert recorded["spec"]["jobs"][0]["data_root"] == str(work.parent / "data" / "cifar10")
    assert "complete" in kit("show", "../results/runs/rel", cwd=work).stdout
    kit("status", "../results/runs/rel", cwd=work)


@pytest.mark.slow
def test_the_python_api_keeps_its_folders_when_the_working_folder_changes_later(work):
    results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "image_size": 32, "steps": 3, "warmup_steps": 1,
                               "batch_size": 8, "workers": 0, "synthetic_samples": 64}], mode="naive", copies=1,
                             out="../results/api", name="rel", monitor=False, progress=False)
    assert list(results.jobs["status"]) == ["complete"]
    os.chdir(work.parent)
    again = colloc_kit.load("results/api/rel")
    assert list(again.runs["run_id"]) == list(results.runs["run_id"])
    assert all(Path(p).is_absolute() for p in again.runs["run_dir"])


def test_a_panel_keeps_the_runs_folder_of_the_folder_it_was_made_in(work):
    panel = ExperimentPanel(models=["smallcnn"], job={"device": "cpu"}, out="../results/panel", name="p")
    os.chdir("/")
    assert panel.out == work.parent / "results" / "panel"


@pytest.mark.slow
def test_export_reads_a_relative_experiment_folder_as_the_one_named_where_it_was_named(work):
    results = work.parent / "results"
    colloc_kit.run([{"model": "smallcnn", "device": "cpu", "image_size": 32, "steps": 3, "warmup_steps": 1,
                     "batch_size": 8, "workers": 0, "synthetic_samples": 64}], out=results, name="exp",
                   monitor=False, progress=False)
    read, said = _source("../results/exp", strict=True)
    os.chdir("/")
    assert said == str(results / "exp") and len(read().runs) == 1

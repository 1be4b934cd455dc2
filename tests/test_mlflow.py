"""Every cell as an MLflow run, against a real `mlflow server` (sqlite backend, a local artifact folder, a free
localhost port): a CPU experiment run with `--mlflow` logs each cell as it completes; `colloc-kit export mlflow` writes
its folder, and MlflowClient reads back `load()`'s values; a second export adds nothing; a half-written run is
replaced; bad input (an unreachable server, a folder with no runs, a broken run) is one message, nothing half-written.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow_server import free_port

import colloc_kit
from colloc_kit import events, reference
from colloc_kit.analysis import summaries as analysis
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput
from colloc_kit.spec import ExperimentSpec, JobSpec
from colloc_kit.store.rundir import find_runs, read_events
from colloc_kit.tracking import log as mlflow_log
from colloc_kit.tracking.records import COMPLETE_TAG, RUN_TAG, records

mlflow = pytest.importorskip("mlflow", reason="needs MLflow (pip install -e '.[mlflow]' or '.[dev]')")
from mlflow.tracking import MlflowClient  # noqa: E402 - after the skip: MLflow is an optional extra

pytestmark = pytest.mark.slow
TINY = ["--model", "smallcnn", "--device", "cpu", "--batch-size", "8", "--image-size", "32", "--workers", "0",
        "--warmup-steps", "2", "--interval-s", "0.005", "--synthetic-samples", "64", "--steps", "12", "--quiet"]
CELL, JOB = "tags.`colloc_kit.kind` = 'cell'", "tags.`colloc_kit.kind` = 'job'"


@pytest.fixture(scope="module")
def live(mlflow_uri, tmp_path_factory):
    """`colloc-kit run --mlflow`: naive x2, then naive x1 (the x2 cell's baseline runs after it), as a real process."""
    out = tmp_path_factory.mktemp("runs")
    done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", "run", *TINY, "--mode", "naive", "--copies", "2,1",
                           "--name", "live", "--out", str(out), "--mlflow", mlflow_uri],
                          capture_output=True, text=True, timeout=600, env=os.environ)
    return done, out / "live"


def runs_of(client: MlflowClient, experiment: str, kind: str) -> list:
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], kind, max_results=1000) if found else []


def test_run_with_mlflow_logs_each_cell_as_it_completes_and_completes_it_at_the_end(live, mlflow_uri):
    done, folder = live
    assert done.returncode == 0, done.stderr
    client = MlflowClient(mlflow_uri)
    cells, jobs = runs_of(client, "live", CELL), runs_of(client, "live", JOB)
    assert len(cells) == 2 and len(jobs) == 3
    assert "warning" not in done.stderr
    # both cells were logged as they completed; the end pass only added what the x2 cell lacked: its baseline ran later
    assert "0 cells written (0 jobs), 1 already there, 1 completed with figures they lacked" in done.stderr
    summary = analysis.run_summary(colloc_kit.load(folder)).set_index("run_id")
    (pair,) = [c for c in cells if c.data.params["copies"] == "2"]
    assert pair.data.metrics["normalized_throughput"] == summary.loc[pair.data.tags[RUN_TAG], "normalized_throughput"]
    assert all(c.data.tags[COMPLETE_TAG] == "true" and c.info.status == "FINISHED" for c in cells)


def test_export_reads_back_through_mlflowclient_equal_to_load(live, mlflow_uri, capsys):
    _, folder = live
    assert main(["export", "mlflow", str(folder), "--tracking-uri", mlflow_uri, "--experiment-name", "exported"]) == 0
    assert "2 cells written (3 jobs)" in capsys.readouterr().out
    client, results = MlflowClient(mlflow_uri), colloc_kit.load(folder)
    cells, jobs = runs_of(client, "exported", CELL), runs_of(client, "exported", JOB)
    assert len(cells) == len(results.runs) == 2 and len(jobs) == len(results.jobs) == 3
    summary = analysis.run_summary(results).set_index("run_id")
    for cell in cells:
        run = results.runs.set_index("run_id").loc[cell.data.tags[RUN_TAG]]
        assert cell.data.tags["colloc_kit.cell_id"] == run["cell_id"] and cell.data.tags[COMPLETE_TAG] == "true"
        assert {k: cell.data.params[k] for k in ("mode", "copies", "repeat", "model", "batch_size", "precision")} == \
            {"mode": "naive", "copies": str(run["copies"]), "repeat": "0", "model": "smallcnn", "batch_size": "8",
             "precision": "fp32"}
        for name in ("aggregate_images_per_s", "aggregate_images_per_s_ci", "n_complete", "window_s"):
            if pd.isna(run[name]):  # a figure load() has not (a CI of one interval): no metric either
                assert name not in cell.data.metrics, name
            else:
                assert cell.data.metrics[name] == pytest.approx(run[name], rel=1e-12), name
        assert cell.data.metrics["epoch_time_growth"] == summary.loc[run.name, "epoch_time_growth"]
        assert cell.info.start_time == int(run["started_at"] * 1000) and cell.info.status == "FINISHED"
        assert {a.path for a in client.list_artifacts(cell.info.run_id)} == {"manifest.json", "machine"}
        steps = [m.step for m in client.get_metric_history(cell.info.run_id, "interval/images_per_s")]
        assert steps and steps == sorted(steps) and steps[0] >= 0
    rows = analysis.with_baselines(results.jobs).set_index(["run_id", "job"])
    for job in jobs:
        row = rows.loc[(job.data.tags[RUN_TAG], job.data.tags["colloc_kit.job"])]
        assert job.data.tags["mlflow.parentRunId"] in {c.info.run_id for c in cells}
        for name in ("images_per_s", "images_per_s_ci", "epoch_time_s", "input_wait_share", "relative_throughput"):
            if pd.isna(row[name]):  # a figure load() has not (a CI of one interval): no metric either
                assert name not in job.data.metrics, name
            else:
                assert job.data.metrics[name] == pytest.approx(row[name], rel=1e-12), name
        stream = read_events(Path(row["run_dir"]) / "jobs" / f"{row.name[1]}.events.jsonl")
        intervals = [e for e in stream if e["type"] == events.INTERVAL]
        history = client.get_metric_history(job.info.run_id, "interval/images_per_s")
        assert len(history) == len(intervals) > 3
        assert [m.value for m in history] == pytest.approx([e["interval_images"] / e["interval_s"] for e in intervals])
        assert [a.path for a in client.list_artifacts(job.info.run_id)] == [f"{row.name[1]}.events.jsonl"]


def test_a_second_export_adds_nothing(live, mlflow_uri, capsys):
    _, folder = live
    client = MlflowClient(mlflow_uri)
    argv = ["export", "mlflow", str(folder), "--tracking-uri", mlflow_uri, "--experiment-name", "twice"]
    assert main(argv) == 0
    before = {r.info.run_id: len(client.get_metric_history(r.info.run_id, "interval/images_per_s"))
              for r in runs_of(client, "twice", CELL) + runs_of(client, "twice", JOB)}
    capsys.readouterr()
    assert main(argv) == 0
    assert "0 cells written (0 jobs), 2 already there;" in capsys.readouterr().out
    after = {r.info.run_id: len(client.get_metric_history(r.info.run_id, "interval/images_per_s"))
             for r in runs_of(client, "twice", CELL) + runs_of(client, "twice", JOB)}
    assert after == before and len(after) == 5


def test_an_export_that_fails_midway_leaves_no_run_looking_complete_and_is_replaced(live, mlflow_uri, monkeypatch):
    _, folder = live
    client, results = MlflowClient(mlflow_uri), colloc_kit.load(folder)
    calls = []

    def fails_at_the_fourth_job(self, run_id, status=None, end_time=None):
        calls.append(run_id)
        if len(calls) == 4:
            raise mlflow.exceptions.MlflowException("the server went away")
        return real(self, run_id, status, end_time)

    real = MlflowClient.set_terminated
    monkeypatch.setattr(MlflowClient, "set_terminated", fails_at_the_fourth_job)
    with pytest.raises(colloc_kit.CollocKitError, match="failed after .* export again: complete runs are skipped"):
        mlflow_log.export(results, mlflow_uri, "midway", workers=1)
    monkeypatch.undo()
    torn = [c for c in runs_of(client, "midway", CELL) if c.data.tags.get(COMPLETE_TAG) != "true"]
    assert len(torn) == 1  # the cell being written when it failed: not marked complete
    again = mlflow_log.export(results, mlflow_uri, "midway")
    assert again.replaced == [torn[0].data.tags[RUN_TAG]] and len(again.skipped) == 1
    cells = runs_of(client, "midway", CELL)
    assert len(cells) == 2 and all(c.data.tags[COMPLETE_TAG] == "true" for c in cells)
    assert len(runs_of(client, "midway", JOB)) == 3  # the torn cell's jobs were replaced too, not doubled


def test_a_reference_set_exports_from_its_tables(live, mlflow_uri, tmp_path, capsys):
    _, folder = live
    shutil.copytree(folder, tmp_path / "gone")
    reference.export(tmp_path / "gone", "tiny-set", root=tmp_path / "sets")
    shutil.rmtree(tmp_path / "gone")  # as for a shipped set: the run folders are elsewhere
    assert main(["export", "mlflow", str(tmp_path / "sets" / "tiny-set"), "--tracking-uri", mlflow_uri,
                 "--experiment-name", "from-tables"]) == 0
    client = MlflowClient(mlflow_uri)
    cells = runs_of(client, "from-tables", CELL)
    assert len(cells) == 2 and all(c.data.metrics["aggregate_images_per_s"] > 0 for c in cells)
    assert all(client.list_artifacts(c.info.run_id) == [] for c in cells)  # no folders: no manifest, no histories
    assert "reference set" in cells[0].data.tags["colloc_kit.source"]


def test_the_shipped_reference_set_makes_one_record_per_run_without_a_server():
    shipped = reference.load("h100-80gb")
    cells = records(shipped)
    assert len(cells) == len(shipped.runs) and sum(len(c.children) for c in cells) == len(shipped.jobs)
    complete = [c for c in cells if c.tags["colloc_kit.status"] == "complete"]
    assert complete and all(c.metrics["aggregate_images_per_s"] > 0 and c.params["gpu_name"].startswith("NVIDIA H100")
                            for c in complete)
    assert any("normalized_throughput" in c.metrics and "fairness" in c.metrics for c in complete)


def test_an_unreachable_server_a_folder_without_runs_and_no_uri_are_refused_with_one_line(live, tmp_path, capsys,
                                                                                         monkeypatch):
    _, folder = live
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert main(["export", "mlflow", str(folder), "--tracking-uri", nowhere]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the MLflow tracking server at {nowhere}" in err and "Traceback" not in err
    assert err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert main(["export", "mlflow", str(tmp_path / "empty"), "--tracking-uri", nowhere]) == 2
    assert "no runs (manifest.json) under" in capsys.readouterr().err
    assert main(["export", "mlflow", str(tmp_path / "nothing-here"), "--tracking-uri", nowhere]) == 2
    assert "is neither a folder nor a shipped reference set" in capsys.readouterr().err
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["export", "mlflow", str(folder)]) == 2
    assert "give the tracking server with --tracking-uri" in capsys.readouterr().err


def test_a_broken_run_is_skipped_with_its_name_or_refused_whole_with_strict(live, mlflow_uri, tmp_path, capsys):
    _, folder = live
    copy = tmp_path / "live"
    shutil.copytree(folder, copy)
    broken = find_runs(copy)[0].path
    (broken / "manifest.json").write_text("{")
    strict = ["export", "mlflow", str(copy), "--tracking-uri", mlflow_uri, "--experiment-name", "broken", "--strict"]
    assert main(strict) == 2
    assert "is broken" in capsys.readouterr().err
    assert MlflowClient(mlflow_uri).get_experiment_by_name("broken") is None  # refused before anything was written
    assert main(strict[:-1]) == 1
    captured = capsys.readouterr()
    assert f"skipped the broken run {broken}" in captured.err and "1 cells written" in captured.out
    assert len(runs_of(MlflowClient(mlflow_uri), "broken", CELL)) == 1


def test_a_damaged_monitor_file_is_named(live, mlflow_uri, tmp_path, capsys):
    """Before: `export mlflow` named a broken run but passed over a damaged monitor file in silence (issue 53)."""
    _, folder = live
    copy = tmp_path / "live"
    shutil.copytree(folder, copy)
    damaged = find_runs(copy)[0].path / "monitor" / "samples_host.parquet"
    damaged.write_text("garbage, not Parquet")
    assert main(["export", "mlflow", str(copy), "--tracking-uri", mlflow_uri, "--experiment-name", "damaged"]) == 1
    captured = capsys.readouterr()
    said = f"the run {damaged.parent.parent} is read in part: "
    assert said in captured.err and "samples_host.parquet" in captured.err
    assert "2 cells written" in captured.out


def test_run_with_an_unreachable_server_warns_and_keeps_every_run(tmp_path):
    nowhere = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", "run", *TINY, "--name", "offline", "--out",
                           str(tmp_path), "--mlflow", nowhere], capture_output=True, text=True, timeout=600,
                          env=os.environ)
    assert done.returncode == 0, done.stderr
    assert f"warning: cannot reach the MLflow tracking server at {nowhere}" in done.stderr
    assert f"not logged to MLflow at {nowhere}" in done.stderr and "export mlflow" in done.stderr
    (run,) = find_runs(tmp_path / "offline")
    assert json.loads((run.path / "manifest.json").read_text())["status"] == "complete"


def test_a_tracking_uri_with_credentials_and_a_missing_mlflow_are_refused(monkeypatch):
    job = JobSpec(model="smallcnn", device="cpu")
    with pytest.raises(BadInput, match="leave credentials out of it and set MLFLOW_TRACKING_USERNAME"):
        ExperimentSpec(jobs=[job], mlflow="http://user:secret@127.0.0.1:5000")
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # as if the extra were not installed
    with pytest.raises(BadInput, match=r"MLflow is not installed here; pip install 'colloc-kit\[mlflow\]'"):
        mlflow_log.check("http://127.0.0.1:5000")

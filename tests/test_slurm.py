"""`colloc-kit run --slurm` against a REAL single-node Slurm (tests/slurm_cluster.py): munged, slurmctld and slurmd
from Debian's packages on localhost, CPU cells (smallcnn). Skipped, with the reason, where Slurm is not installed or
cannot run tasks (not root); CI installs it (.ci/run)."""

import json
import subprocess
import time

import pytest
from slurm_cluster import SlurmCluster, why_not

import colloc_kit
from colloc_kit.cli.main import main
from colloc_kit.pipeline.status import experiment_status
from colloc_kit.store.rundir import find_runs, read_events

pytest.importorskip("submitit", reason="submitit (the [slurm] extra) is not installed")
CELL_FLAGS = ["--model", "smallcnn", "--device", "cpu", "--steps", "12", "--warmup-steps", "2", "--batch-size", "8",
              "--image-size", "32", "--workers", "0", "--interval-s", "0.1", "--synthetic-samples", "64",
              "--copies", "1,2", "--no-monitor", "--quiet"]
WAIT_S = 240


@pytest.fixture
def cluster(tmp_path_factory, monkeypatch):
    reason = why_not()
    if reason:
        pytest.skip(f"no real Slurm here: {reason}")
    with SlurmCluster(tmp_path_factory.mktemp("slurm")) as running:
        monkeypatch.setenv("SLURM_CONF", str(running.conf))  # sbatch, squeue and scancel find this cluster
        yield running


def settled(exp_dir):
    """Wait until no cell is pending or running and Slurm's queue is empty (a task reads its last cell back after
    the cell's manifest is complete); return the status rows."""
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = experiment_status(exp_dir)
        queue = subprocess.run(["squeue", "--noheader"], capture_output=True, text=True, check=True).stdout
        if all(r["status"] in ("done", "failed") for r in rows) and not queue.strip():
            return {r["cell"].split("-r0-")[0]: r for r in rows}
        assert time.monotonic() < deadline, f"cells still in Slurm after {WAIT_S} s: {rows}"
        time.sleep(0.5)


@pytest.mark.slow
def test_slurm_runs_each_cell_as_an_array_task_and_resubmits_only_what_failed(cluster, tmp_path, capsys):
    out, exp_dir = tmp_path / "runs", tmp_path / "runs" / "experiment"
    argv = ["run", *CELL_FLAGS, "--slurm", "--time-min", "5", "--array-parallelism", "1", "--out", str(out)]
    assert main(argv) == 0
    submitted = json.loads((exp_dir / "slurm" / "submitted.json").read_text())
    assert len(submitted) == 2 and "submitted 2 cell(s) to Slurm" in capsys.readouterr().err
    second = next(job for cell, job in submitted.items() if cell.startswith("naive-x2"))
    subprocess.run(["scancel", second], check=True)  # one array task fails: cancelled before it ran

    first_round = settled(exp_dir)
    assert first_round["naive-x1"]["status"] == "done" and first_round["naive-x1"]["slurm_job"].endswith("_0")
    assert first_round["naive-x2"]["status"] == "failed" and "ended without a run" in first_round["naive-x2"]["detail"]

    assert main(argv) == 0  # the same command again: only the failed cell goes to Slurm
    said = "".join(capsys.readouterr())  # the reuse notice on stdout, Slurm's lines on stderr
    assert "1 cell(s) already complete" in said and "submitted 1 cell(s)" in said
    second_round = settled(exp_dir)
    assert {r["status"] for r in second_round.values()} == {"done"}
    assert second_round["naive-x2"]["slurm_job"] != second
    assert second_round["naive-x1"]["run"] == first_round["naive-x1"]["run"]

    results = colloc_kit.load(out)
    assert list(results.runs["status"]) == ["complete", "complete"] and (results.jobs["images_per_s"] > 0).all()
    assert results.runs["host"].notna().all()
    jobs = {run.read_manifest().slurm_job_id for run in find_runs(out)}
    assert jobs == {first_round["naive-x1"]["slurm_job"], second_round["naive-x2"]["slurm_job"]}

    assert main(["status", str(exp_dir)]) == 0
    assert "2 done" in capsys.readouterr().out
    assert main(argv) == 0 and "nothing to submit" in capsys.readouterr().err


@pytest.mark.slow
def test_one_array_task_runs_several_cells_through_one_preloaded_process_and_resumes(cluster, tmp_path, capsys):
    """--cells-per-task 2: three cells go to Slurm as two tasks; the two cells of the first task ran in one process
    whose jobs were forked from one zygote; a wider matrix into the same folder submits only the new cell."""
    out, exp_dir = tmp_path / "runs", tmp_path / "runs" / "experiment"
    argv = ["run", *CELL_FLAGS, "--repeats", "1", "--slurm", "--cells-per-task", "2", "--time-min", "5",
            "--out", str(out)]
    wider = [*argv, "--copies", "1,2,3"]
    assert main([*argv, "--copies", "1,2", "--mode", "naive,exclusive"]) == 0
    said = capsys.readouterr().err
    assert "submitted 4 cell(s) to Slurm as 2 task(s)" in said
    submitted = json.loads((exp_dir / "slurm" / "submitted.json").read_text())
    assert len(set(submitted.values())) == 2
    settled(exp_dir)
    runs = [run.read_manifest() for run in find_runs(out)]
    assert {m.status for m in runs} == {"complete"}
    by_task: dict = {}
    for m in runs:
        by_task.setdefault(m.slurm_job_id, []).append(m)
    assert sorted(len(ms) for ms in by_task.values()) == [2, 2]
    for ms in by_task.values():
        assert len({m.runner_pid for m in ms}) == 1, "a task's cells ran in one process"
        ready = []
        for m in ms:
            run = next(r for r in find_runs(out) if r.read_manifest().run_id == m.run_id)
            ready += [next(e for e in read_events(run.events_path(j.job)) if e["type"] == "ready") for j in m.jobs]
            assert (run.path / "jobs.csv").is_file(), "each cell read back by its task (while the next one started)"
        parents = {event["ppid"] for event in ready}
        assert len(parents) == 1 and parents != {ms[0].runner_pid}, "forked from the task's one zygote"
        assert all(event["quick_start"] for event in ready), "a task's cells start as a local lane's: quick"

    assert main([*wider, "--mode", "naive,exclusive"]) == 0
    said = "".join(capsys.readouterr())
    assert "4 cell(s) already complete" in said and "submitted 2 cell(s) to Slurm as 1 task(s)" in said
    settled(exp_dir)
    assert len(find_runs(out)) == 6

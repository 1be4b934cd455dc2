"""End-to-end runs on the CPU: real worker processes, the barrier, failures that spare the neighbours, interrupts."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import colloc_kit
from colloc_kit import events
from colloc_kit.cli.main import build_parser, experiment_from_args, main
from colloc_kit.errors import BadInput, GpuStateError
from colloc_kit.modes import Slot
from colloc_kit.modes.simple import NaiveMode
from colloc_kit.pipeline.launcher import LaunchItem, Wave
from colloc_kit.spec import JobSpec
from colloc_kit.store.rundir import find_runs

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=0, warmup_steps=2, interval_s=0.1,
            synthetic_samples=64)


def tiny(**changes) -> dict:
    return {**TINY, "steps": 12, **changes}


@pytest.mark.slow
def test_two_naive_jobs_complete_and_load(tmp_path):
    results = colloc_kit.run([tiny()], mode="naive", copies=2, out=tmp_path, monitor=False, progress=False)
    jobs = results.jobs
    assert list(jobs["status"]) == ["complete", "complete"]
    assert (jobs["images_per_s"] > 0).all()
    assert (jobs["epoch_time_s"] > 0).all()
    run = results.runs.iloc[0]
    assert run["status"] == "complete" and run["n_complete"] == 2 and run["aggregate_images_per_s"] > 0
    (run_dir,) = [r.path for r in find_runs(tmp_path)]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    machine = json.loads((run_dir / manifest["machine"]["description"]).read_text())  # described once per experiment
    assert manifest["status"] == "complete" and machine["host"]["logical_cores"] >= 1
    assert machine["versions"]["torch"] and manifest["machine"]["hostname"] == machine["host"]["hostname"]
    assert run["host"] == machine["host"]["hostname"] and run["cell_id"] == manifest["cell_id"]
    assert colloc_kit.load(tmp_path).jobs.shape[0] == 2  # a folder of runs loads the same


@pytest.mark.slow
def test_barrier_releases_jobs_together(tmp_path):
    results = colloc_kit.run([tiny(steps=6)], mode="naive", copies=3, out=tmp_path, monitor=False, progress=False)
    starts = results.jobs["started_at"]
    readies = results.jobs["ready_at"]
    assert starts.max() - starts.min() < 0.5, "released together"
    assert (starts >= readies.max() - 1e-3).all(), "nobody starts before the last job is ready"


@pytest.mark.slow
def test_exclusive_runs_jobs_one_after_another(tmp_path):
    results = colloc_kit.run([tiny(steps=6)], mode="exclusive", copies=2, out=tmp_path, monitor=False, progress=False)
    first, second = results.jobs.sort_values("started_at").to_dict("records")
    assert second["started_at"] >= first["ended_at"]
    assert results.runs.iloc[0]["throughput_window"] == "sequential"


@pytest.mark.slow
def test_out_of_memory_job_is_recorded_and_neighbour_completes(tmp_path):
    jobs = [tiny(steps=30), tiny(steps=30, fail_at_step=4, fail_kind="out_of_memory")]
    results = colloc_kit.run(jobs, mode="naive", out=tmp_path, monitor=False, progress=False)
    by_model = results.jobs.set_index("group")
    assert by_model.loc[0, "status"] == "complete" and by_model.loc[0, "images_per_s"] > 0
    assert by_model.loc[1, "status"] == "failed" and by_model.loc[1, "error_kind"] == "out_of_memory"
    assert results.runs.iloc[0]["status"] == "failed_jobs"


@pytest.mark.slow
def test_killed_worker_is_recorded_and_neighbour_completes(tmp_path):
    killed = []

    def kill_second_job(event):
        if event["type"] == events.INTERVAL and event["job"].startswith("j1") and not killed:
            os.kill(event_pids[event["job"]], signal.SIGKILL)
            killed.append(event["job"])

    event_pids = {}
    items = [LaunchItem(f"j{i}-smallcnn", JobSpec(**tiny(steps=40)), Slot(f"naive-{i}")) for i in range(2)]
    wave = Wave(items, tmp_path / "jobs", on_event=kill_second_job,
                on_start=lambda pids: event_pids.update({job: pid for pid, job in pids.items()}))
    first, second = wave.run()
    assert killed == ["j1-smallcnn"]
    assert first.status == "complete"
    assert second.status == "failed" and second.error_kind == "killed" and "SIGKILL" in second.error


@pytest.mark.slow
def test_crash_without_event_is_recorded(tmp_path):
    results = colloc_kit.run([tiny(steps=30), tiny(steps=30, fail_at_step=3, fail_kind="crash")], mode="naive",
                             out=tmp_path, monitor=False, progress=False)
    crashed = results.jobs.set_index("group").loc[1]
    assert crashed["status"] == "failed" and crashed["error_kind"] == "killed"
    assert results.jobs.set_index("group").loc[0, "status"] == "complete"


@pytest.mark.slow
def test_time_limit_stops_a_job(tmp_path):
    results = colloc_kit.run([tiny(steps=100000)], mode="naive", out=tmp_path, monitor=False, progress=False,
                             time_limit_s=2)
    job = results.jobs.iloc[0]
    assert job["status"] == "timed_out"
    assert results.jobs["ended_at"].isna().all()  # the worker never reached its end event


@pytest.mark.slow
def test_interrupt_stops_jobs_and_keeps_the_run(tmp_path):
    def interrupt_soon():
        time.sleep(0.1)
        while not list(tmp_path.rglob("*.events.jsonl")) or not any(
                '"interval"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")):
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        colloc_kit.run([tiny(steps=100000)], mode="naive", copies=2, out=tmp_path, monitor=False, progress=False)
    (run,) = find_runs(tmp_path)
    manifest = run.read_manifest()
    assert manifest.status == "interrupted"
    assert {j.outcome.status for j in manifest.jobs} == {"interrupted"}
    loaded = colloc_kit.load(tmp_path)
    assert loaded.runs.iloc[0]["status"] == "interrupted" and len(loaded.jobs) == 2
    assert (run.path / "jobs.csv").exists()


def test_bad_input_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(BadInput, match="smallcn"):
        colloc_kit.run([tiny(model="smallcn")], out=tmp_path, monitor=False, progress=False)
    assert not list(tmp_path.rglob("manifest.json"))


@pytest.mark.parametrize("argv, message", [
    (["--model", "nosuchnet"], "nosuchnet"),
    (["--model", "smallcnn", "--batch-size", "-3"], "batch_size must be a positive integer"),
    (["--model", "smallcnn", "--dataset", "cifar10", "--data-root", "/nonexistent/cifar"], "/nonexistent/cifar"),
    (["--model", "smallcnn", "--mode", "naive", "--thread-percentage", "50"],
     "--thread-percentage is an option of mode mps, and no mode of this run (naive) takes it"),
])
def test_cli_bad_input_exits_2(tmp_path, capsys, argv, message):
    code = main(["run", "--device", "cpu", "--out", str(tmp_path), *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.rglob("manifest.json"))


def test_cli_mode_options_go_to_the_modes_that_take_them():
    args = build_parser().parse_args(["run", "--model", "resnet18", "--mode", "exclusive,naive,mps",
                                      "--thread-percentage", "50"])
    modes = {m.name: dict(m.options) for m in experiment_from_args(args).modes}
    assert modes == {"exclusive": {}, "naive": {}, "mps": {"thread_percentage": 50}}


def test_cli_bad_yaml_exits_2(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("jobs:\n  - model: smallcnn\n    colour: blue\n")
    assert main(["run", str(spec), "--out", str(tmp_path)]) == 2
    assert "unknown key(s) colour" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_run_and_show(tmp_path, capsys):
    argv = ["run", "--mode", "naive", "--model", "smallcnn", "--copies", "2", "--dataset", "synthetic", "--device",
            "cpu", "--epochs", "1", "--batch-size", "16", "--image-size", "32", "--synthetic-samples", "128",
            "--workers", "0", "--warmup-steps", "2", "--no-monitor", "--quiet", "--out", str(tmp_path)]
    started = time.monotonic()
    assert main(argv) == 0
    assert time.monotonic() - started < 60
    printed = capsys.readouterr().out
    assert "complete" in printed and "aggregate_images_per_s" in printed
    jobs = colloc_kit.load(tmp_path).jobs
    assert len(jobs) == 2 and (jobs["status"] == "complete").all() and (jobs["images_per_s"] > 0).all()
    assert main(["show", str(tmp_path)]) == 0
    assert "j1-smallcnn" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_exit_1_when_a_job_fails_and_stderr_names_the_job_its_run_and_why(tmp_path, capsys):
    argv = ["run", "--model", "smallcnn", "--device", "cpu", "--steps", "20", "--warmup-steps", "2", "--image-size",
            "32", "--batch-size", "8", "--workers", "0", "--fail-at-step", "3", "--no-monitor", "--quiet",
            "--out", str(tmp_path)]
    assert main(argv) == 1
    (job,) = colloc_kit.load(tmp_path).jobs.itertuples()
    printed = capsys.readouterr()
    assert f"colloc-kit: {job.job} of run {job.run_id} failed: {job.error}" in printed.err and job.error
    assert "None" not in printed.out and "NaN" not in printed.out  # what a failed job lacks is a dash in the tables


@pytest.mark.slow
def test_sigterm_stops_the_run_cleanly(tmp_path):
    """A timeout or service stop (SIGTERM) takes Ctrl-C's path: exit 130, the run on disk marked interrupted."""
    cmd = [sys.executable, "-m", "colloc_kit.cli", "run", "--model", "smallcnn", "--device", "cpu", "--steps", "100000",
           "--image-size", "32", "--batch-size", "8", "--workers", "0", "--no-monitor", "--quiet",
           "--out", str(tmp_path)]
    kit = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any('"interval"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")):
        assert time.monotonic() < deadline and kit.poll() is None, kit.communicate()
        time.sleep(0.2)
    kit.terminate()
    assert kit.wait(60) == 130
    (run,) = find_runs(tmp_path)
    manifest = run.read_manifest()
    assert manifest.status == "interrupted"
    assert {j.outcome.status for j in manifest.jobs} == {"interrupted"}


def test_a_mode_that_fails_to_start_leaves_a_readable_run_and_its_own_error(tmp_path, monkeypatch):
    """The mode's error reaches the caller (not a reader's crash on jobs that never got a slot)."""
    def refuse(self):
        raise GpuStateError("the mode could not start")

    monkeypatch.setattr(NaiveMode, "__enter__", refuse)
    with pytest.raises(GpuStateError, match="could not start"):
        colloc_kit.run([tiny()], mode="naive", copies=2, out=tmp_path, monitor=False, progress=False)
    results = colloc_kit.load(tmp_path)
    assert list(results.runs["status"]) == ["error"]
    assert list(results.jobs["slot_label"].isna()) == [True, True]

"""The training worker as a process: event sequence, start barrier, budgets, fault injection, bad input."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

from colloc_kit import events

TINY = ["--model", "smallcnn", "--device", "cpu", "--image-size", "16", "--batch-size", "8",
        "--synthetic-samples", "32", "--workers", "0"]  # 4 steps per epoch


def worker(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "colloc_kit.worker", *TINY, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def run(*args: str, env: dict | None = None) -> tuple[int, list[dict], str]:
    """Run a worker to its end; returns (exit code, events, stderr). Every stdout line must be an event."""
    proc = worker(*args, env=env)
    out, err = proc.communicate(timeout=120)
    parsed = [events.parse(line) for line in out.splitlines()]
    assert all(parsed), f"stdout carried something other than events:\n{out}"
    return proc.returncode, parsed, err


def of_type(evs: list[dict], type_: str) -> list[dict]:
    return [e for e in evs if e["type"] == type_]


@pytest.mark.slow
def test_runs_alone_and_emits_a_valid_event_sequence():
    code, evs, _ = run("--steps", "9", "--warmup-steps", "3", "--interval-s", "0.01", "--job-id", "solo")
    assert code == 0
    types = [e["type"] for e in evs]
    assert types[:2] == ["ready", "start"] and types[-2:] == ["measured", "end"]  # alone: no held steps
    assert set(types[2:-2]) == {"interval", "epoch"}
    assert all(e["job"] == "solo" for e in evs)
    assert [e["t"] for e in evs] == sorted(e["t"] for e in evs)

    ready = evs[0]
    assert ready["model"] == "smallcnn" and ready["device"] == "cpu" and ready["pid"] > 0
    assert "synthetic" in ready["dataset_label"] and ready["params"] > 0 and ready["image_size"] == 16
    assert ready["threads"] == 1  # OMP_NUM_THREADS from the launcher is honoured

    intervals = of_type(evs, "interval")
    assert intervals[-1]["step"] == 12 and intervals[-1]["images"] == 96
    assert sum(i["interval_images"] for i in intervals) == 96
    warm = [i for i in intervals if i["warmup"]]
    assert warm and warm[-1]["step"] == 3  # an interval closes exactly at the end of warm-up
    assert all(not i["warmup"] for i in intervals if i["step"] > 3)
    assert all(i["step_time_s"] > 0 and i["data_wait_s"] >= 0 and i["loss"] > 0 for i in intervals)

    assert [e["epoch"] for e in of_type(evs, "epoch")] == [1, 2, 3]
    assert all(e["images"] == 32 and e["images_per_s"] > 0 for e in of_type(evs, "epoch"))

    end = evs[-1]
    assert end["status"] == "complete" and end["steps"] == 12 and end["images"] == 96  # 3 warm-up + 9 measured
    assert end["steady_images"] == 9 * 8 and end["images_per_s"] == pytest.approx(72 / end["steady_s"])
    assert end["held_s"] == 0 and not any(i["held"] for i in intervals)
    assert of_type(evs, "measured")[0]["images_per_s"] == end["images_per_s"]
    assert end["peak_allocated_mb"] is None and end["peak_reserved_mb"] is None and end["peak_rss_mb"] > 0


@pytest.mark.slow
def test_barrier_holds_until_a_line_arrives_and_the_job_trains_on_until_told_to_stop():
    proc = worker("--steps", "4", "--warmup-steps", "2", "--interval-s", "0.01", "--barrier", "stdin")
    try:
        assert events.parse(proc.stdout.readline())["type"] == "ready"
        readable, _, _ = select.select([proc.stdout], [], [], 1.0)
        assert not readable and proc.poll() is None, "the worker went on before the barrier opened"
        released = time.time()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        seen = []
        while not seen or seen[-1]["type"] != "measured":
            seen.append(events.parse(proc.stdout.readline()))
        held = [events.parse(proc.stdout.readline()) for _ in range(3)]
        assert proc.poll() is None, "past its budget the job trains on until the launcher says stop"
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        rest = [events.parse(line) for line in proc.stdout]
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert seen[0]["type"] == "start" and seen[0]["t"] >= released
    assert all(e["held"] for e in held + rest if e["type"] == "interval") and rest[-1]["type"] == "end"
    end = rest[-1]
    assert end["steps"] > 6 and end["held_s"] > 0 and end["steady_images"] == 4 * 8  # the window is the budget alone


@pytest.mark.slow
def test_barrier_eof_means_the_launcher_died_and_exits_3():
    proc = worker("--steps", "6", "--warmup-steps", "2", "--barrier", "stdin")
    try:
        assert events.parse(proc.stdout.readline())["type"] == "ready"
        proc.stdin.close()
        assert proc.wait(timeout=60) == 3
        assert proc.stdout.read() == ""  # no start, no error: it just leaves
    finally:
        proc.kill()


@pytest.mark.slow
def test_stdin_eof_while_training_stops_the_job():
    """The launcher died (even by SIGKILL): its end of the pipe closes, and the job leaves instead of training on."""
    proc = worker("--steps", "100000", "--warmup-steps", "2", "--barrier", "stdin")
    try:
        assert events.parse(proc.stdout.readline())["type"] == "ready"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert events.parse(proc.stdout.readline())["type"] == "start"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 3
    finally:
        proc.kill()


@pytest.mark.slow
def test_epochs_budget_ends_after_whole_epochs():
    code, evs, _ = run("--epochs", "2", "--warmup-steps", "1")
    assert code == 0
    assert [e["epoch"] for e in of_type(evs, "epoch")] == [1, 2]
    assert evs[-1]["steps"] == 8 and evs[-1]["epochs"] == 2


@pytest.mark.slow
def test_seconds_budget_counts_the_measured_window_after_warmup():
    code, evs, _ = run("--seconds", "1.5", "--warmup-steps", "2", "--interval-s", "0.2")
    assert code == 0
    end = evs[-1]
    step_time = max(i["step_time_s"] for i in of_type(evs, "interval"))
    assert 1.5 <= end["steady_s"] <= 1.5 + 2 * step_time + 0.5
    assert end["train_s"] > end["steady_s"]  # warm-up comes on top
    assert end["steps"] > 2 and end["images_per_s"] > 0


@pytest.mark.slow
def test_budget_inside_warmup_reports_no_throughput():
    code, evs, _ = run("--epochs", "1", "--warmup-steps", "10")
    assert code == 0
    end = evs[-1]
    assert end["steps"] == 4 and end["steady_s"] == 0 and end["steady_images"] == 0
    assert end["images_per_s"] is None and "inside warm-up" in end["note"]


@pytest.mark.parametrize("kind, exit_code", [("out_of_memory", 1), ("cuda_error", 1)])
@pytest.mark.slow
def test_fault_injection_reports_its_error_kind(kind, exit_code):
    code, evs, err = run("--steps", "18", "--warmup-steps", "2", "--fail-at-step", "5", "--fail-kind", kind)
    assert code == exit_code
    assert evs[-1]["type"] == "error" and evs[-1]["kind"] == kind
    assert "injected at step 5" in evs[-1]["message"] and "Traceback" in err
    assert not of_type(evs, "end")


@pytest.mark.slow
def test_fault_injection_crash_dies_without_a_word():
    code, evs, _ = run("--steps", "18", "--warmup-steps", "2", "--fail-at-step", "5", "--fail-kind", "crash")
    assert code == -9
    # the end of warm-up (step 2) and of epoch 1 (step 4) are reported, then nothing
    assert [e["type"] for e in evs] == ["ready", "start", "interval", "epoch"]


def test_unknown_model_lists_the_valid_ones():
    code, evs, _ = run("--model", "resnet9000")
    assert code == 2
    assert [e["type"] for e in evs] == ["error"] and evs[0]["kind"] == "bad_input"
    assert "resnet9000" in evs[0]["message"] and "resnet26" in evs[0]["message"] and "smallcnn" in evs[0]["message"]


def test_missing_data_root_says_where_it_looked_and_how_to_get_it(tmp_path):
    code, evs, _ = run("--dataset", "cifar10", "--data-root", str(tmp_path / "nowhere"), "--job-id", "c")
    assert code == 2
    assert [(e["type"], e["job"], e["kind"]) for e in evs] == [("error", "c", "bad_input")]
    assert str(tmp_path / "nowhere") in evs[0]["message"]
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in evs[0]["message"]


def test_bad_option_is_bad_input():
    code, evs, _ = run("--batch-size", "0")
    assert code == 2 and evs[0]["kind"] == "bad_input" and "batch_size" in evs[0]["message"]


GPU_JOB = ["--device", "cuda", "--model", "resnet18", "--image-size", "64", "--batch-size", "32", "--amp", "bf16",
           "--channels-last", "--steps", "20", "--warmup-steps", "5"]


@pytest.mark.gpu
def test_gpu_run_reports_the_whole_runs_peak_memory():
    code, evs, _ = run(*GPU_JOB)
    assert code == 0 and evs[0]["device"].startswith("NVIDIA")
    end = evs[-1]
    assert end["images_per_s"] > 0 and 0 < end["peak_allocated_mb"] <= end["peak_reserved_mb"]


@pytest.mark.gpu
def test_gpu_out_of_memory_fault_is_a_real_allocator_error():
    code, evs, _ = run(*GPU_JOB, "--fail-at-step", "3", "--fail-kind", "out_of_memory")
    assert code == 1 and evs[-1]["kind"] == "out_of_memory"
    assert "Tried to allocate" in evs[-1]["message"]  # torch's own message, not the kit's

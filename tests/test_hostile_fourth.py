"""Hostile input and faults, fourth pass (issue 43), on the CPU: two kits on one folder, torn reads while a run writes,
and the newer commands (advise, export mlflow, batch, --plan) held to the contract."""

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

import colloc_kit
from colloc_kit.cli.main import main
from colloc_kit.monitor.store import ParquetStore, read_samples
from colloc_kit.store import claims
from colloc_kit.store.manifest import JobEntry, Manifest, ModeRecord
from colloc_kit.store.rundir import MANIFEST, RunDir, find_runs, this_runner

REPO = Path(__file__).resolve().parents[1]
TINY_FLAGS = ["--model", "smallcnn", "--device", "cpu", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
              "--synthetic-samples", "64", "--batch-size", "8", "--workers", "0", "--quiet"]


def kit(*argv: str, **popen) -> subprocess.Popen:
    """`colloc-kit ARGV` as a process of its own (a second kit, a batch to interrupt)."""
    return subprocess.Popen([sys.executable, "-m", "colloc_kit.cli", *map(str, argv)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def cli(capsys, *argv) -> tuple[int, str, str]:
    """`colloc-kit ARGV` in this process; (exit code, stdout, stderr), no traceback."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return code, out, err


def kit_processes() -> list[psutil.Process]:
    """Processes of the kit this test process started (kits, lanes, workers, kernels)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "colloc_kit" in " ".join(proc.cmdline()) or "ipykernel" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def nothing_of_the_kit_left():
    """Every case: no process of the kit left once it is over."""
    yield
    deadline = time.monotonic() + 10
    while kit_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = kit_processes()
    for proc in left:
        proc.kill()
    assert not left, f"processes left: {[p.pid for p in left]}"


# ---------------------------------------------------------------- two kits on one folder


def _runs_by_cell(folder: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for run in find_runs(folder):
        manifest = json.loads((run.path / MANIFEST).read_text())
        found.setdefault(manifest["cell_id"], []).append(manifest)
    return found


@pytest.mark.parametrize("stagger_s", [0.0, 1.5])
def test_two_kits_on_one_folder_never_run_one_cell_twice_or_at_once(tmp_path, stagger_s):
    argv = ["run", *TINY_FLAGS, "--copies", "1", "--repeats", "3", "--name", "shared", "--no-monitor",
            "--out", tmp_path]
    first = kit(*argv)
    time.sleep(stagger_s)
    second = kit(*argv)
    outs = [proc.communicate(timeout=240) for proc in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outs
    runs = _runs_by_cell(tmp_path / "shared")
    assert len(runs) == 3 and all(len(r) == 1 for r in runs.values()), {c: len(r) for c, r in runs.items()}
    assert all(r[0]["status"] == "complete" for r in runs.values())
    spans = sorted((r[0]["started_at"], r[0]["ended_at"]) for r in runs.values())
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans  # never at once
    said = outs[0][1] + outs[1][1]
    assert "left to another kit" in said or "being run by another process" in said or \
        "already complete" in said, said
    assert not list((tmp_path / "shared" / claims.CLAIMS).glob("*.json"))  # every claim released


def test_a_claim_whose_owner_is_gone_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    file = tmp_path / claims.CLAIMS / "cell-a.json"
    file.parent.mkdir()
    file.write_text(json.dumps({"pid": int(dead.stdout), "started_at": 1.0, "host": os.uname().nodename}))
    assert claims.holder(tmp_path, "cell-a") is None
    with claims.claimed(tmp_path, "cell-a") as other:
        assert other is None and claims.holder(tmp_path, "cell-a")["pid"] == os.getpid()
        with claims.claimed(tmp_path, "cell-a") as again:  # held by a live process: left to it
            assert again is not None and again["pid"] == os.getpid()
    assert not file.exists()


def _race_for(folder: Path, won) -> None:
    with claims.claimed(folder, "cell-b") as other:
        if other is None:
            won.put(os.getpid())
            time.sleep(1.0)


def test_processes_racing_for_a_stale_claim_give_it_one_owner(tmp_path):
    file = tmp_path / claims.CLAIMS / "cell-b.json"
    file.parent.mkdir()
    file.write_text(json.dumps({"pid": 999_999_999, "started_at": 1.0}))
    context = multiprocessing.get_context("fork")
    won = context.Queue()
    racers = [context.Process(target=_race_for, args=(tmp_path, won)) for _ in range(6)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    owners = [won.get(timeout=1) for _ in range(won.qsize())] if hasattr(won, "qsize") else []
    assert len(owners) == 1, owners
    assert not file.exists()


def test_show_of_a_run_in_progress_lists_its_job_as_running(tmp_path, capsys):
    pid, started = this_runner()
    run = RunDir.create(tmp_path, "live", "naive-x1-r0")
    spec = {"model": "smallcnn", "dataset": "synthetic", "batch_size": 8, "amp": "off", "device": "cpu"}
    run.write_manifest(Manifest(run_id=run.run_id, mode=ModeRecord("naive"), jobs=[JobEntry("j0-smallcnn", group=0,
                                spec=spec)], runner_pid=pid, runner_started_at=started, started_at=time.time()))
    code, out, err = cli(capsys, "show", tmp_path / "live", "--json")
    jobs = json.loads(out)
    assert [j["status"] for j in jobs] == ["running"], jobs


# ---------------------------------------------------------------- torn reads while a run writes


def test_monitor_files_read_in_a_loop_while_written_are_never_torn(tmp_path):
    schema = pa.schema([("t", pa.float64()), ("value", pa.float64())])
    store = ParquetStore(tmp_path / "monitor", {"samples_host": schema})
    rows = [(float(i), float(i)) for i in range(20000)]

    def write() -> None:
        for _ in range(60):
            store.write("samples_host", rows)
        store.close()

    writer = threading.Thread(target=write)
    writer.start()
    reads, problems = 0, []
    while writer.is_alive() or reads == 0:
        samples = read_samples(tmp_path)
        problems += samples.problems
        assert len(samples.host) % len(rows) == 0, len(samples.host)  # whole parts only
        reads += 1
    writer.join()
    assert not problems, problems[:3]
    assert len(read_samples(tmp_path).host) == 60 * len(rows)
    assert not [p.name for p in (tmp_path / "monitor").rglob("*.tmp")]


def test_a_folder_read_in_a_loop_while_a_run_writes_it(tmp_path):
    proc = kit("run", *TINY_FLAGS, "--steps", "30", "--copies", "1,2", "--name", "busy", "--monitor-interval",
               "0.05", "--out", tmp_path)
    reads = 0
    while proc.poll() is None:
        if (tmp_path / "busy").is_dir():
            results = colloc_kit.load(tmp_path / "busy")
            assert not results.broken, results.broken
            assert not any(p for p in results.runs.get("problems", []) if isinstance(p, str)), results.runs
            reads += 1
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert reads > 3

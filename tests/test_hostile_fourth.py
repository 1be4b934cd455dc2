"""Hostile input and faults, fourth pass (issue 43), on the CPU: two kits on one folder, torn reads while a run writes,
and the newer commands (advise, export mlflow, batch, --plan) held to the contract."""

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pytest
from processes import below_us

import colloc_kit
from colloc_kit import reference
from colloc_kit.cli import advise as advise_cli
from colloc_kit.cli.main import main
from colloc_kit.monitor.store import ParquetStore, read_samples
from colloc_kit.predict import advise as adv
from colloc_kit.predict import check as predict_check
from colloc_kit.store import claims
from colloc_kit.store.manifest import JobEntry, Manifest, ModeRecord
from colloc_kit.store.rundir import MANIFEST, RunDir, find_runs, this_runner
from colloc_kit.tracking import log as mlflow_log
from colloc_kit.tracking import writers
from colloc_kit.tracking.records import COMPLETE_TAG

REPO = Path(__file__).resolve().parents[1]
TINY_FLAGS = ["--model", "smallcnn", "--device", "cpu", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
              "--synthetic-samples", "64", "--batch-size", "8", "--workers", "0", "--quiet"]


def _ctrl_c_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell's background job (CI) passes SIGINT on ignored


def kit(*argv: str, **popen) -> subprocess.Popen:
    """`colloc-kit ARGV` as a process of its own (a second kit, an export to interrupt)."""
    return subprocess.Popen([sys.executable, "-m", "colloc_kit.cli", *map(str, argv)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_ctrl_c_as_in_a_terminal,
                            **popen)


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
    return below_us("colloc_kit", "ipykernel")


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
@pytest.mark.slow
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


@pytest.mark.slow
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


# ---------------------------------------------------------------- advise held to the contract


@pytest.mark.parametrize(("argv", "says"), [
    (["--copies", "1000000000"], "--copies takes counts from 1 to 48"),
    (["--copies", "0"], "--copies takes counts from 1 to 48"),
    (["--modes", "sideways"], "--modes takes"),
    (["--pairs", "/nonexistent/folder/pairs.csv"], "--pairs"),
    (["--pairs", "/tmp"], "--pairs /tmp is a folder"),
    (["--experiment", "nope"], "no lone runs"),
])
def test_advise_refuses_bad_flags_before_any_work(capsys, argv, says):
    code, out, err = cli(capsys, "advise", "resnet26 bs128 seed on", *argv)
    assert code == 2 and says in err, (code, err)
    assert not out


def test_advise_ranking_of_one_workload_at_several_copy_counts_says_each_rows_copies(capsys):
    lone = predict_check.profiles(reference.load(reference.DEFAULT))
    workload = adv.parse_mix("resnet26 bs128 seed on", lone)
    table = adv.advise(workload, lone, copies=[3, 7], modes=["naive", "mps"], bands={})
    advise_cli._print([table], argparse.Namespace(top=4, explain=False), "test", {})
    out = capsys.readouterr().out
    heading, header, *rows = [line for line in out.splitlines() if line.strip()][1:]
    assert "at 3,7 copies" in heading and "copies" in header.split(), out
    assert {row.split()[1] for row in rows} == {"3", "7"}, out


# ---------------------------------------------------------------- MLflow stores held to the contract


@pytest.mark.parametrize("uri", ["sqlite:////proc/no/mlflow.db", "/proc/sys/mlruns", "ftp://example.org/mlruns"])
def test_an_mlflow_store_that_cannot_be_used_is_refused_before_anything(tmp_path, capsys, uri):
    pytest.importorskip("mlflow")
    started = time.monotonic()
    code, out, err = cli(capsys, "run", *TINY_FLAGS, "--name", "never", "--mlflow", uri, "--out", tmp_path)
    assert code == 2 and "MLflow" in err and "give" in err, (code, err)
    assert not list(tmp_path.rglob(MANIFEST))
    code, out, err = cli(capsys, "export", "mlflow", "h100-80gb", "--tracking-uri", uri)
    assert code == 2 and "MLflow" in err, (code, err)
    assert time.monotonic() - started < 30


def test_a_run_waits_on_a_silent_tracking_server_a_bounded_time_and_says_so(tmp_path, monkeypatch, capsys):
    pytest.importorskip("mlflow")
    monkeypatch.setattr(mlflow_log, "LOG_WAIT_S", 0.5)
    hung = threading.Event()
    started = time.monotonic()
    mlflow_log._bounded("http://silent", "cell x", tmp_path, lambda: hung.wait(30))
    assert time.monotonic() - started < 5
    assert "did not take cell x within" in capsys.readouterr().err
    hung.set()


def whole_cells(db: Path) -> int:
    """Cells an export wrote whole into the MLflow sqlite store `db` (the tag it sets last); 0 before its tables."""
    import sqlite3  # noqa: PLC0415 - with the sqlite store's tests only

    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as store:
        return store.execute(f"select count(*) from tags where key = '{COMPLETE_TAG}' and value = 'true'"
                             ).fetchone()[0]
    return 0


@pytest.mark.slow
def test_ctrl_c_stops_an_export_within_a_second_saying_what_was_written(tmp_path):
    pytest.importorskip("mlflow")
    db = tmp_path / "mlflow.db"
    proc = kit("export", "mlflow", "h100-80gb", "--tracking-uri", f"sqlite:///{db}")
    while proc.poll() is None and whole_cells(db) < 1:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    proc.wait(timeout=60)
    elapsed = time.monotonic() - interrupted
    out, err = proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert elapsed < 1.0, f"{elapsed:.2f} s from Ctrl-C to the export's exit"
    said = err.strip().splitlines()[-1]
    written, cells = map(int, re.search(r"has (\d+) of (\d+) cells written", said).groups())
    assert cells == len(reference.load("h100-80gb").runs) and out == "", (said, out)
    assert 1 <= written == whole_cells(db) < cells / 2, (said, whole_cells(db))  # the line says what the store holds
    assert f"{cells - written} not written" in said and "export again" in said, said


def test_a_stopped_export_starts_no_mlflow_call_and_waits_a_bounded_time_for_those_under_way():
    hung, calls_made = threading.Event(), []

    def put(cell: int) -> str:
        calls_made.append(cell)
        calls.answer(cell)
        return "created"

    def answer(cell: int) -> None:
        if cell == 0:
            hung.wait(30)  # the first cell's call hangs (a server that stopped answering)
        time.sleep(0.02)

    calls = writers.Calls(argparse.Namespace(answer=answer))
    each = writers.written(list(range(100)), put, calls, (OSError,), workers=2)
    assert next(each) == (1, "created")
    started = time.monotonic()
    each.close()  # the caller stopped: Ctrl-C, an error
    assert time.monotonic() - started < writers.STOP_GRACE_S + 0.5
    time.sleep(0.2)
    assert calls.stopped and len(calls_made) < 50, calls_made  # the rest never started
    with pytest.raises(writers.Stopped):
        calls.answer(2)
    hung.set()


# ---------------------------------------------------------------- a batch interrupted or terminated

BATCH_SCRIPT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job would ignore it
from colloc_kit.batch import runner
runner.load_profiles = lambda *a: {"t": {}}
from colloc_kit.cli.main import main
sys.exit(main(["batch", "--profile", "t", "--notebooks", sys.argv[1], "--out", sys.argv[2]]))
"""


def _notebook(path: Path, *sources: str) -> None:
    import nbformat  # noqa: PLC0415 - the batch's extra

    book = nbformat.v4.new_notebook()
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell("INTERACTIVE = False\nPLOTLY_RENDERER = ''")
    cell.metadata["tags"] = ["parameters"]
    book.cells = [cell, *map(nbformat.v4.new_code_cell, sources)]
    nbformat.write(book, path)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_a_batch_stopped_midway_still_says_what_ran_what_was_interrupted_and_what_never_started(tmp_path, stop):
    pytest.importorskip("papermill")
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "01_quick.ipynb", "x = 1")
    started = tmp_path / "02-started"  # written by the slow cell as it starts
    _notebook(books / "02_slow.ipynb", f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(120)")
    _notebook(books / "03_never.ipynb", "x = 3")
    proc = subprocess.Popen([sys.executable, "-c", BATCH_SCRIPT, str(books), str(tmp_path / "out")], cwd=REPO,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in out + err, err
    (folder,) = (tmp_path / "out").iterdir()
    record = json.loads((folder / "batch.json").read_text())
    assert [(n["name"], n["status"]) for n in record["notebooks"]] == [
        ("01_quick", "ok"), ("02_slow", "interrupted"), ("03_never", "not run")]
    index = (folder / "index.html").read_text()
    assert "interrupted" in index and "not run" in index
    assert not [p.name for p in folder.iterdir() if p.is_socket()]


# ---------------------------------------------------------------- the weak answers


def test_data_make_leaves_no_stale_temp_files_and_its_marker_counts_what_is_there(tmp_path, capsys):
    from colloc_kit.worker import standin  # noqa: PLC0415 - the stand-in writer

    folder = standin.make("cifar10", tmp_path, images=20, jobs=1, progress=False)
    killed = folder / "train" / "cat" / ".cat_9.png.4242.tmp"  # what a writer killed mid-image leaves
    killed.write_bytes(b"half an image")
    standin.make("cifar10", tmp_path, images=10, jobs=1, progress=False)
    assert not list(folder.rglob("*.tmp"))
    assert "; 20 training images" in (folder / standin.MARKER).read_text()  # not 10: the 20 are all there


def test_reference_export_names_damaged_and_running_runs(tmp_path, capsys):
    pid, started = this_runner()
    run = RunDir.create(tmp_path / "study", "study", "naive-x1-r0")
    spec = {"model": "smallcnn", "dataset": "synthetic", "batch_size": 8, "amp": "off", "device": "cpu"}
    run.write_manifest(Manifest(run_id=run.run_id, mode=ModeRecord("naive"), jobs=[JobEntry("j0-smallcnn", group=0,
                                spec=spec)], runner_pid=pid, runner_started_at=started, started_at=time.time()))
    broken = tmp_path / "study" / "study" / "20260101-000000-naive-x2-r0"
    broken.mkdir()
    (broken / MANIFEST).write_text("{not json")
    code, out, err = cli(capsys, "reference", "export", tmp_path / "study", "--name", "t", "--to", tmp_path / "sets")
    assert code == 0, err
    assert "still running" in err and str(run.path) in err
    assert "broken run" in err and str(broken) in err


def test_batch_parameters_are_checked_against_each_notebooks_types_before_anything_runs(tmp_path, capsys):
    pytest.importorskip("papermill")
    from colloc_kit.batch import runner  # noqa: PLC0415 - the batch's extra

    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "01_one.ipynb", "x = 1")
    book = json.loads((books / "01_one.ipynb").read_text())
    book["cells"][0]["source"] = "INTERACTIVE = False\nPLOTLY_RENDERER = ''\nREPEATS = 3\nMODELS = ['resnet18']"
    (books / "01_one.ipynb").write_text(json.dumps(book))
    for given, says in (({"REPEATS": "abc"}, "takes a whole number"), ({"MODELS": 5}, "takes a list")):
        with pytest.raises(colloc_kit.BadInput, match=says):
            runner.plan("t", {"t": {}}, books, given)
    assert runner.plan("t", {"t": {}}, books, {"REPEATS": 2, "MODELS": ["resnet50"]})
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_plan_warns_of_a_damaged_folder_and_estimates_only_from_runs_of_the_same_jobs(tmp_path, capsys):
    code, out, err = cli(capsys, "run", *TINY_FLAGS, "--no-monitor", "--name", "est", "--out", tmp_path)
    assert code == 0, err
    (tmp_path / "est" / "specs").mkdir(exist_ok=True)
    (tmp_path / "est" / "specs" / "0000000000.json").write_text("{torn")
    code, out, err = cli(capsys, "run", *TINY_FLAGS, "--batch-size", "16", "--no-monitor", "--name", "est", "--plan",
                         "--out", tmp_path)
    assert code == 0, err
    assert "0000000000.json" in err  # the damaged spec file named
    assert "no cells of these jobs measured" in out, out  # batch size 16: the bs8 run does not count


@pytest.mark.parametrize(("error", "says"), [
    (PermissionError(13, "Permission denied", "/d/a.png"), "cannot read /d/a.png (permission denied): fix"),
    (FileNotFoundError(2, "No such file or directory", "/d/a.png"), "/d/a.png is gone"),
    (OSError(28, "No space left on device", "/out/x"), "the disk is full (/out/x): free space"),
    (MemoryError(), "out of host memory: lower --batch-size"),
    (RuntimeError("DataLoader worker (pid(s) 4242) exited unexpectedly"), "a data-loader worker died"),
])
def test_a_failed_jobs_reason_says_what_went_wrong_and_what_to_do(error, says):
    from colloc_kit.worker.reasons import reason  # noqa: PLC0415 - the worker's

    assert reason(error).startswith(says), reason(error)


@pytest.mark.slow
def test_a_job_on_a_damaged_image_fails_saying_which_and_what_to_do(tmp_path, capsys):
    from fake_datasets import write_imagefolder  # noqa: PLC0415 - the tests' helper

    root = write_imagefolder(tmp_path / "images", classes=2, images_per_class=4)
    for image in (root / "train").rglob("*.png"):
        image.write_bytes(b"not an image at all")
    code, out, err = cli(capsys, "run", *TINY_FLAGS, "--dataset", "imagefolder", "--data-root", root, "--no-monitor",
                         "--out", tmp_path / "out")
    assert code == 1
    (job,) = colloc_kit.load(tmp_path / "out").jobs.to_dict("records")
    assert re.search(r"/train/class_\d/\d+\.png cannot be read as an image", job["error"]), job["error"]  # which one
    assert "make a stand-in in the real layout with `colloc-kit data make imagenet" in job["error"]  # what to do

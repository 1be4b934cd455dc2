"""Hostile input and injected faults, on the CPU: the CLI's contract holds in every case.

Each case asserts the exit code (0 complete, 1 some job failed or a run broke, 2 bad input with nothing started,
130 interrupted), that the message says what to do, that no traceback reaches the user, that nothing was started
where nothing should be (no run folder), that no worker process is left (an autouse fixture), and that no completed
result is lost or hidden. Everything is real: real worker processes, real files, a real full disk (/dev/full, and a
64 KiB tmpfs where this machine can mount one), real permissions (a process that gave up root where needed).
"""

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml  # noqa: F401 - imported before a test forks a child that gives up root (it could not import then)
from fake_datasets import write_imagefolder
from fake_nvml import FakeNvml
from processes import below_us, survivors_of_killed_kit

import colloc_kit
import colloc_kit.pipeline  # noqa: F401 - the same
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.gpu import nvml
from colloc_kit.modes import Slot
from colloc_kit.pipeline.launcher import LaunchItem, Wave
from colloc_kit.spec import JobSpec
from colloc_kit.statuses import COMPLETE, FAILED, JOB_STATUSES, RUN_STATUSES
from colloc_kit.store.manifest import Manifest
from colloc_kit.store.rundir import MANIFEST, RunDir, effective_status, find_runs, this_runner

TINY_FLAGS = ["--model", "smallcnn", "--device", "cpu", "--image-size", "32", "--steps", "3", "--warmup-steps", "1",
              "--synthetic-samples", "64", "--batch-size", "8", "--workers", "0", "--no-monitor", "--quiet"]
TINY_JOB = dict(model="smallcnn", device="cpu", image_size=32, steps=3, warmup_steps=1, synthetic_samples=64,
                batch_size=8, workers=0, interval_s=0.05)
SAYS_WHAT_TO_DO = re.compile(r"\b(give|use|lower|raise|fix|save|write|flatten|remove|choose|check|free|move|must|"
                             r"needs?|arrange|download|expected|at most|valid|add|drop)\b", re.I)
NOBODY = 65534


# ---------------------------------------------------------------- helpers


def worker_processes() -> list[psutil.Process]:
    """Worker processes started by this test process (directly or through a kit it started)."""
    return below_us("colloc_kit.worker")


@pytest.fixture(autouse=True)
def no_process_left():
    """Every case: no worker left behind once it is over (a second's grace for exiting processes to be reaped)."""
    yield
    deadline = time.monotonic() + 5
    while worker_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = worker_processes()
    for proc in left:  # ours: clean up before failing, so that one failure does not cascade
        proc.kill()
    assert not left, f"worker processes left: {[p.pid for p in left]}"


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run `colloc-kit ARGV` in this process; (exit code, stdout, stderr). argparse's own refusals exit 2 too."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: usage and a one-line error on stderr
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return code, out, err


def refused(capsys, out_dir: Path, *argv) -> str:
    """Assert a bad-input refusal: exit 2, one message that says what to do, and no run folder; return it."""
    code, out, err = cli(capsys, *argv)
    assert code == 2, (code, out, err)
    assert err.startswith(("colloc-kit: ", "usage: ")), err
    assert err.startswith("usage: ") or SAYS_WHAT_TO_DO.search(err), err  # argparse: the usage says what to give
    assert not list(Path(out_dir).rglob(MANIFEST)) and not (Path(out_dir) / "experiment").exists()
    return err


def write_spec(tmp_path: Path, text: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def as_nobody(fn) -> tuple[int, str]:
    """Run fn() in a forked child that gave up root (real permission checks); (its return value, its stderr)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        err = io.StringIO()
        sys.stderr = err
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            code, err = 99, io.StringIO(f"{type(exc).__name__}: {exc}")
        os.write(write_end, json.dumps([code, err.getvalue()]).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return tuple(json.loads(data))


def mounted_tmpfs(path: Path, options: str) -> bool:
    """Mount a tmpfs at path (True), or False where this machine does not allow it (CI without privileges)."""
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


# ---------------------------------------------------------------- bad flags: exit 2, nothing started


@pytest.mark.parametrize("flags, says", [
    (["--name", ".."], "name must be a folder name"),
    (["--name", "a/b"], "name must be a folder name"),
    (["--name", "."], "name must be a folder name"),
    (["--copies", "10000"], "at most 48"),
    (["--copies", "0"], "copies must be whole numbers of at least 1"),
    (["--copies", "99999999999999999999"], "at most 48"),
    (["--image-size", "1"], "at least 4 pixels"),
    (["--image-size", "0"], "image_size must be a positive integer"),
    (["--model", "resnet18", "--image-size", "16"], "resnet18 needs images of at least 32 pixels"),
    (["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
    (["--batch-size", "0"], "batch_size must be a positive integer"),
    (["--lr", "nan"], "lr must be a positive number"),
    (["--lr", "-1"], "lr must be a positive number"),
    (["--seconds", "inf"], "seconds must be a positive number"),
    (["--time-limit", "inf"], "time_limit_s must be a positive number"),
    (["--time-limit", "0"], "time_limit_s must be a positive number"),
    (["--monitor-interval", "-1"], "monitor_interval_s must be a positive number"),
    (["--synthetic-samples", "4"], "smaller than one batch"),
    (["--dataset", "cifar10"], "needs --data-root"),
    (["--dataset", "nosuch"], "unknown dataset"),
    (["--dataset", "imagefolder", "--data-root", "/nonexistent/images"], "does not exist"),
    (["--mode", "nosuchmode"], "nosuchmode"),
    (["--mode", "naive", "--thread-percentage", "50"], "is an option of mode mps"),
    (["--amp", "fp8"], "amp must be one of"),
    (["--workers", "-1"], "workers must be a whole number"),
    (["--copies", "abc"], "expected comma-separated whole numbers, such as 1,2,4; got 'abc'"),
    (["--copies", "1.5"], "expected comma-separated whole numbers, such as 1,2,4; got '1.5'"),
    (["--steps", "1.5"], "invalid int value"),
])
def test_bad_flags_are_refused_before_anything_starts(tmp_path, capsys, flags, says):
    err = refused(capsys, tmp_path, "run", *TINY_FLAGS, "--out", tmp_path, *flags)
    assert says in err


def test_run_without_spec_or_model_says_what_to_give(tmp_path, capsys):
    assert "--model" in refused(capsys, tmp_path, "run", "--out", tmp_path)


def test_an_image_folder_with_an_empty_class_folder_is_refused(tmp_path, capsys):
    root = write_imagefolder(tmp_path / "images", classes=2, images_per_class=2)
    (root / "train" / "class_empty").mkdir()
    err = refused(capsys, tmp_path / "out", "run", *TINY_FLAGS, "--dataset", "imagefolder", "--data-root", root,
                  "--out", tmp_path / "out")
    assert "class_empty" in err and "hold no images" in err


def test_out_inside_a_run_folder_is_refused(tmp_path, capsys):
    """Before: `--out` pointing into an existing run's folder nested a new experiment there unsaid (issue 53)."""
    run = tmp_path / "runs" / "exp" / "20261123-004941-naive-x1-r0"
    shutil.copytree(Path(__file__).parent / "data" / "kit-b96d848" / "old" / run.name, run)
    for out in (run, run / "jobs", run / "new"):
        code, _, err = cli(capsys, "run", *TINY_FLAGS, "--out", out)
        assert code == 2 and f"is inside the run folder {run}; give the folder that holds your experiments" in err
    assert sorted(p.name for p in run.iterdir()) == ["jobs", "manifest.json"]


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for out in (afile, afile / "sub"):
        assert "is a file, not a folder" in refused(capsys, tmp_path, "run", *TINY_FLAGS, "--out", out)
    assert afile.read_text() == "keep me"


def test_out_on_a_read_only_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "ro"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
    elif not mounted_tmpfs(folder, "ro,size=1m"):
        pytest.skip("running as root and cannot mount a read-only tmpfs here")
    try:
        err = refused(capsys, folder, "run", *TINY_FLAGS, "--out", folder / "runs")
        assert "cannot write in" in err and "give a folder you can write to" in err
    finally:
        if os.geteuid() == 0:
            unmount(folder)


def test_debug_shows_the_traceback_with_the_message(tmp_path, capsys):
    code = main(["--debug", "run", *TINY_FLAGS, "--name", "..", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" in err and "colloc-kit: name must be a folder name" in err


# ---------------------------------------------------------------- hostile spec files: exit 2, nothing started


ALIAS_BOMB = "\n".join(["a: &a [1,1,1,1,1,1,1,1,1]"] + [
    f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]" for i in range(1, 8)]
    + ["copies: *h", "jobs: [{model: smallcnn, device: cpu}]"])


@pytest.mark.parametrize("text, says", [
    pytest.param(os.urandom(64) + b"\xff\xfe", "is not UTF-8 text", id="random bytes"),  # an id xdist's workers share
    ("name: caf\xe9\njobs: [{model: smallcnn}]\n".encode("latin-1"), "is not UTF-8 text"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 20 levels"),
    ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 40)), "nested deeper than 20 levels"),
    (ALIAS_BOMB, "aliases (*name) are not allowed"),
    ("x: &x 5\ncopies: *x\njobs: [{model: smallcnn, device: cpu}]\n", "aliases (*name) are not allowed"),
    ("jobs: [{model: smallcnn}\n  - a: b: c\n", "is not valid YAML"),
    ("a: !!python/object:os.system x\n", "is not valid YAML"),
    ("- just\n- a list\n", "a spec is a mapping"),
    ("jobs: 5\n", "'jobs' must be a non-empty list"),
    ("jobs: []\n", "'jobs' must be a non-empty list"),
    ("jobs: [5]\n", "jobs[0] must be a mapping"),
    ("jobs: [{model: smallcnn, device: cpu, 1: 2}]\n", "unknown key(s) 1"),
    ("jobs: [{model: smallcnn, device: cpu}]\nmodes: 42\n", "'modes' must be a list"),
    ("jobs: [{model: smallcnn, device: cpu}]\nmodes: [{name: 3}]\n", "a mode is a name"),
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: abc\n", "'copies' must be a whole number of copies or a list"),
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: 100\n", "at most 48"),
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: [true]\n", "copies must be whole numbers of at least 1"),
    ("jobs: [{model: smallcnn, device: cpu}]\nrepeats: 1.0\n", "repeats must be a positive integer"),
    ("jobs: [{model: smallcnn, device: cpu}]\ngpu: -1\n", "gpu must be a GPU index"),
    ("jobs: [{model: smallcnn, device: cpu}]\nname: 123\n", "name must be a folder name"),
    ("jobs: [{model: smallcnn, device: cpu}]\nname: '..'\n", "name must be a folder name"),
    ("jobs: [{model: smallcnn, device: cpu}]\nname: ''\n", "name must be a folder name"),
    ("jobs: [{model: smallcnn, device: cpu}]\ntime_limit_s: true\n", "time_limit_s must be a positive number"),
    ("jobs: [{model: smallcnn, device: cpu}]\nmonitor: 'yes'\n", "monitor must be true or false"),
    ("jobs: [{model: smallcnn, device: cpu}]\nmonitor_interval_s: .nan\n", "monitor_interval_s must be a positive"),
    ("jobs: [{model: smallcnn, device: cpu, channels_last: 'false'}]\n", "channels_last must be true or false"),
    ("jobs: [{model: smallcnn, device: cpu, pin_memory: 'no'}]\n", "pin_memory must be true or false"),
    ("jobs: [{model: smallcnn, device: cpu, lr: true}]\n", "lr must be a positive number"),
    ("jobs: [{model: smallcnn, device: cpu, seconds: true}]\n", "seconds must be a positive number"),
    ("jobs: [{model: smallcnn, device: cpu, seconds: .inf}]\n", "seconds must be a positive number"),
    ("jobs: [{model: smallcnn, device: cpu, data_root: 123}]\n", "data_root must be a folder path"),
    ("jobs: [{model: 123, device: cpu}]\n", "model must be a non-empty name"),
    ("jobs: [{model: smallcnn, device: cpu, dataset: [1]}]\n", "dataset must be a name"),
    ("jobs: [{model: smallcnn, device: cpu, amp: 1}]\n", "amp must be a name"),
    ("jobs: [{model: smallcnn, device: null}]\n", "device must be a name"),
    ("jobs: [{model: smallcnn, device: cpu, batch_size: '64'}]\n", "batch_size must be a positive integer"),
    ("jobs: [{model: smallcnn, device: cpu, steps: 1.5}]\n", "steps must be a positive integer"),
    ("jobs: [{model: smallcnn, device: cpu, warmup_steps: true}]\n", "warmup_steps must be a whole number"),
    ("jobs: [{model: smallcnn, device: cpu, image_size: 1}]\n", "at least 4 pixels"),
    ("jobs: [{model: smallcnn, device: cpu, interval_s: 0}]\n", "interval_s must be a positive number"),
    ("jobs: [{model: smallcnn, device: cpu, batch_size: " + "9" * 5000 + "}]\n", "a value YAML cannot read"),
    ("jobs: [{model: smallcnn, device: cpu}]\nname: 2024-02-31\n", "a value YAML cannot read"),
])
def test_hostile_specs_are_refused_with_a_short_message(tmp_path, capsys, text, says):
    spec = write_spec(tmp_path, text)
    err = refused(capsys, tmp_path, "run", spec, "--out", tmp_path)
    assert says in err
    assert len(err) < 800, "a message quotes at most a short excerpt"


def test_a_spec_larger_than_a_megabyte_is_refused_unread(tmp_path, capsys):
    spec = write_spec(tmp_path, "# " + "x" * 1_100_000 + "\njobs: [{model: smallcnn}]\n")
    assert "larger than 1,000,000 bytes" in refused(capsys, tmp_path, "run", spec, "--out", tmp_path)


def test_a_missing_spec_names_the_bundled_ones(tmp_path, capsys):
    err = refused(capsys, tmp_path, "run", tmp_path / "nosuch.yaml", "--out", tmp_path)
    assert "does not exist" in err and "cpu-smoke" in err


@pytest.mark.parametrize("where", ["file", "folder"])
def test_an_unreadable_spec_says_so(where):
    """A spec only root may read, read by a process that gave up root (pytest's tmp_path is root's alone)."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        inner = Path(folder) / "locked"
        inner.mkdir()
        spec = write_spec(inner, "jobs: [{model: smallcnn, device: cpu}]\n")
        (spec if where == "file" else inner).chmod(0o000)
        code, err = as_nobody(lambda: main(["run", str(spec), "--out", str(Path(folder) / "out")]))
        inner.chmod(0o755)
        assert code == 2 and "cannot read the spec" in err and "Permission denied" in err, err
        assert "check its permissions" in err and "Traceback" not in err and not (Path(folder) / "out").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_spec_that_is_not_a_file_is_refused_without_blocking(tmp_path, capsys, kind):
    spec = tmp_path / "spec.yaml"
    spec.mkdir() if kind == "folder" else os.mkfifo(spec)
    assert "is not a file" in refused(capsys, tmp_path, "run", spec, "--out", tmp_path)


# ---------------------------------------------------------------- mig: exit 2 with a message, never a traceback


@pytest.mark.parametrize("argv, says", [
    (["mig", "plan", "99999999999999999999x1g", "--gpu", "H100-80GB"], "far more than a GPU holds"),
    (["mig", "plan", "8x1g", "--gpu", "H100-80GB"], "allows at most 7"),
    (["mig", "plan", "9g", "--gpu", "H100-80GB"], "9g"),
    (["mig", "plan", ",", "--gpu", "H100-80GB"], "the MIG layout is empty"),
    (["mig", "plan", "1g", "--gpu", "NoSuchGPU"], "NoSuchGPU"),
    (["mig", "propose", "abc", "--gpu", "H100-80GB"], "memory needs must be positive MiB"),
    (["mig", "propose", "1e400", "--gpu", "H100-80GB"], "memory needs must be positive MiB"),
    (["mig", "propose", "0,nan", "--gpu", "H100-80GB"], "memory needs must be positive MiB"),
    (["mig", "propose", "100", "--headroom", "-99999", "--gpu", "H100-80GB"], "--headroom must be 0 or more"),
    (["mig", "propose", "100", "--headroom", "lots"], "invalid int value"),
])
def test_mig_bad_input_exits_2(capsys, argv, says):
    code, _, err = cli(capsys, *argv)
    assert code == 2 and says in err, err
    assert err.startswith("usage: ") or SAYS_WHAT_TO_DO.search(err), err


# ---------------------------------------------------------------- real runs: paths, failures, full disks


@pytest.mark.slow
def test_a_name_with_spaces_prints_the_folder_that_exists(tmp_path, capsys):
    out = tmp_path / "my runs"
    code, printed, _ = cli(capsys, "run", *TINY_FLAGS, "--name", "my study", "--out", out)
    assert code == 0
    folder = re.search(r"stored under (.+?) ; read with", printed).group(1)
    assert Path(folder).is_dir() and Path(folder).parent == out
    assert len(colloc_kit.load(folder).jobs) == 1


@pytest.mark.slow
def test_a_failing_job_exits_1_and_its_neighbour_is_kept(tmp_path, capsys):
    spec = write_spec(tmp_path, json.dumps({"jobs": [{**TINY_JOB, "steps": 6},
                                                     {**TINY_JOB, "steps": 6, "fail_at_step": 2, "fail_kind": "crash"}],
                                            "monitor": False}))
    code, printed, _ = cli(capsys, "run", spec, "--quiet", "--out", tmp_path / "out")
    assert code == 1
    jobs = colloc_kit.load(tmp_path / "out").jobs.set_index("group")
    assert jobs.loc[0, "status"] == COMPLETE and jobs.loc[0, "images_per_s"] > 0
    assert jobs.loc[1, "status"] == FAILED and "j0-smallcnn" in printed and "j1-smallcnn" in printed


def _wave(tmp_path: Path, n: int, steps: int = 40) -> Wave:
    job = JobSpec(**{**TINY_JOB, "steps": steps, "interval_s": 0.001})
    items = [LaunchItem(f"j{i}", job, Slot(env={}, label="cpu")) for i in range(n)]
    return Wave(items, jobs_dir=tmp_path / "jobs", time_limit_s=120)


@pytest.mark.slow
def test_an_event_log_on_a_full_disk_fails_its_job_without_hanging(tmp_path):
    """/dev/full: every write fails with ENOSPC. The pump keeps draining, the job is stopped and says where it
    could not write; its neighbour completes."""
    wave = _wave(tmp_path, 2)
    wave.jobs_dir.mkdir()
    (wave.jobs_dir / "j1.events.jsonl").symlink_to("/dev/full")
    full, good = sorted(wave.run(), key=lambda o: o.job_id, reverse=True)
    assert good.status == COMPLETE
    assert full.status == FAILED and full.error_kind == "other"
    assert full.error == f"could not write {wave.jobs_dir / 'j1.events.jsonl'}: No space left on device"


@pytest.mark.slow
def test_an_event_log_that_cannot_be_opened_fails_its_job_without_hanging(tmp_path):
    wave = _wave(tmp_path, 2, steps=4)
    (wave.jobs_dir / "j0.events.jsonl").mkdir(parents=True)
    outcomes = {o.job_id: o for o in wave.run()}
    assert outcomes["j1"].status == COMPLETE
    assert outcomes["j0"].status == FAILED and "could not write" in outcomes["j0"].error
    assert "Is a directory" in outcomes["j0"].error


@pytest.mark.slow
def test_a_run_on_a_full_disk_ends_says_where_and_leaves_no_temp_file(tmp_path):
    """A 64 KiB tmpfs under --out, events every millisecond: the run ends (no hang), exit 1, the message says where
    and what to do; the run marks itself (its manifest rewritten in its own space): each job failed, saying which
    file it could not write; what was written is readable."""
    disk = tmp_path / "disk"
    if not mounted_tmpfs(disk, "size=64k"):
        pytest.skip("cannot mount a tmpfs on this machine (needs root); the /dev/full cases above always run")
    try:
        cmd = [sys.executable, "-m", "colloc_kit.cli", "run", *TINY_FLAGS, "--steps", "400", "--interval-s", "0.001",
               "--copies", "2", "--out", str(disk)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and "No space left on device" in done.stderr
        assert "free space" in done.stderr and str(disk) in done.stderr
        assert not list(disk.rglob("*.tmp"))
        results = colloc_kit.load(disk)
        assert not results.broken and len(results.jobs) == 2
        assert results.runs.iloc[0]["status"] in ("failed_jobs", "error")
        for _, job in results.jobs.iterrows():
            assert job["status"] == FAILED and job["error"].startswith(f"could not write {disk}")
            assert job["error"].endswith(".events.jsonl: No space left on device")
    finally:
        unmount(disk)


@pytest.mark.slow
def test_workers_die_with_a_sigkilled_kit(tmp_path):
    """Workers that write nothing for a minute (no event would hit the dead pipe) still die with the kit, and so does
    the zygote that forked them: their stdin closes with it, and a worker leaves when its stdin closes."""
    cmd = [sys.executable, "-m", "colloc_kit.cli", "run", *TINY_FLAGS, "--steps", "1000000", "--copies", "2",
           "--synthetic-samples", "8000000", "--interval-s", "60", "--out", str(tmp_path)]
    kit = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sum('"start"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")) < 2:
        assert time.monotonic() < deadline and kit.poll() is None
        time.sleep(0.2)
    below = worker_processes()  # the two jobs' workers and the zygote (`python -m colloc_kit.worker.zygote`)
    assert sum("--job-id" in " ".join(p.cmdline()) for p in below) == 2
    alive = survivors_of_killed_kit(kit, below, timeout=10)
    assert not alive, f"{[' '.join(p.cmdline())[:80] for p in alive]} outlived the SIGKILLed kit"


@pytest.mark.slow
def test_two_interrupts_in_a_row_do_not_record_started_jobs_as_not_started(tmp_path):
    def interrupt_twice():
        while sum('"interval"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")) < 2:
            time.sleep(0.05)
        for _ in range(2):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.02)

    threading.Thread(target=interrupt_twice, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        colloc_kit.run([{**TINY_JOB, "steps": 100000}], mode="naive", copies=2, out=tmp_path, monitor=False,
                       progress=False)
    (run,) = find_runs(tmp_path)
    manifest = run.read_manifest()
    assert manifest.status == "interrupted"
    for entry in manifest.jobs:
        assert entry.outcome.status == "interrupted" and "not started" not in entry.outcome.error


# ---------------------------------------------------------------- broken runs beside good ones: none hidden


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory) -> Path:
    """A real folder of three runs (one tiny CPU job each, host monitor on): the good runs every case starts from."""
    out = tmp_path_factory.mktemp("three")
    colloc_kit.run([TINY_JOB], mode="naive", repeats=3, out=out, monitor_interval_s=0.05, progress=False)
    return out


def _runs_with(tmp_path: Path, three_runs: Path, damage) -> tuple[Path, RunDir, list[RunDir]]:
    """A copy of the three runs with the first one damaged by damage(run); (folder, broken run, good runs)."""
    folder = tmp_path / "runs"
    shutil.copytree(three_runs, folder)
    broken, *good = find_runs(folder)
    damage(broken)
    return folder, broken, good


def _write(relative: str, data: bytes | str):
    def damage(run: RunDir) -> None:
        path = run.path / relative
        if path.is_dir():
            shutil.rmtree(path)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return damage


def _events_dir(run: RunDir) -> None:
    (events,) = run.jobs_dir.glob("*.events.jsonl")
    events.unlink()
    events.mkdir()


def _truncated_manifest(run: RunDir) -> None:
    text = (run.path / MANIFEST).read_text()
    (run.path / MANIFEST).write_text(text[: len(text) // 2])


def _manifest_with(**changes):
    def damage(run: RunDir) -> None:
        manifest = json.loads((run.path / MANIFEST).read_text())
        manifest.update(changes)
        (run.path / MANIFEST).write_text(json.dumps(manifest))
    return damage


def _manifest_folder(run: RunDir) -> None:
    (run.path / MANIFEST).unlink()
    (run.path / MANIFEST).mkdir()


BROKEN = {
    "truncated manifest": (_truncated_manifest, "cannot be read as JSON"),
    "garbage manifest": (_write(MANIFEST, os.urandom(200) + b"\xff"), "cannot be read as JSON"),
    "empty manifest": (_write(MANIFEST, b""), "cannot be read as JSON"),
    "{} manifest": (_write(MANIFEST, "{}"), "no mode name"),
    "[1,2] manifest": (_write(MANIFEST, "[1, 2]"), "a JSON list, not an object"),
    "null manifest": (_write(MANIFEST, "null"), "a JSON NoneType, not an object"),
    "manifest with an unknown status": (_manifest_with(status="exploded"), "unknown run status 'exploded'"),
    "manifest whose jobs lack specs": (_manifest_with(jobs=[{"job": "j0"}]), "lacks a job id or its spec"),
    "manifest with a job id that leaves the run": (
        _manifest_with(jobs=[{"job": "../../x", "spec": {}}]), "lacks a job id or its spec"),
    "manifest is a folder": (_manifest_folder, "cannot be read as JSON (Is a directory)"),
    "events file is a directory": (_events_dir, "cannot be read (Is a directory)"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_show_and_load_read_every_good_run_and_name_the_broken_one(tmp_path, capsys, three_runs, case):
    damage, says = BROKEN[case]
    folder, broken, good = _runs_with(tmp_path, three_runs, damage)

    code, printed, err = cli(capsys, "show", folder)
    assert code == 1
    assert f"skipped the broken run {broken.path}" in err and says in err, err
    assert printed.count("j0-smallcnn") == 2 and printed.count(COMPLETE) >= 4  # both good runs, both jobs

    results = colloc_kit.load(folder)
    assert set(results.runs["run_id"]) == {run.run_id for run in good}
    assert (results.jobs["status"] == COMPLETE).all() and (results.jobs["images_per_s"] > 0).all()
    assert list(results.broken) == [str(broken.path)] and says in results.broken[str(broken.path)]

    with pytest.raises(BrokenRun, match="strict=False"):
        colloc_kit.load(folder, strict=True)
    code, _, err = cli(capsys, "show", folder, "--strict")
    assert code == 2 and str(broken.path) in err


@pytest.mark.parametrize("line", ["null", '{"type": "interval", "job": "j0"}', '{"type": "epoch", "t": 1}', "[1, 2]",
                                  '"text"', '{"type": "interval", "t": "soon", "interval_s": 1, "interval_images": 8}',
                                  "\udcff garbage \x00", '{"type": "nosuch", "t": 1}', '{"t": 1}',
                                  '{"type": "end", "t": 9e99, "images_per_s": "fast", "steady_s": []}',
                                  '{"type": "interval", "t": 5, "interval_s": 0, "interval_images": 8}',
                                  '{"type": "interval", "t": NaN, "interval_s": 1, "interval_images": 8}',
                                  '{"type": "interval", "t": 5, "interval_s": 1, "interval_images": 8, '
                                  '"data_wait_s": "x"}'])
def test_a_stray_line_in_an_event_log_is_skipped_and_the_run_read(tmp_path, capsys, three_runs, line):
    def damage(run: RunDir) -> None:
        (events,) = run.jobs_dir.glob("*.events.jsonl")
        lines = events.read_text().splitlines()
        events.write_text("\n".join(lines[:2] + [line] + lines[2:] + [line]) + "\n", errors="surrogateescape")

    folder, _, _ = _runs_with(tmp_path, three_runs, damage)
    code, printed, _ = cli(capsys, "show", folder)
    assert code == 0 and printed.count("j0-smallcnn") == 3
    results = colloc_kit.load(folder)
    assert not results.broken and (results.jobs["status"] == COMPLETE).all()
    assert (results.jobs["images_per_s"] > 0).all()


def test_show_of_a_folder_of_broken_runs_only_exits_2_naming_each(tmp_path, capsys, three_runs):
    folder = tmp_path / "runs"
    shutil.copytree(three_runs, folder)
    for run in find_runs(folder):
        (run.path / MANIFEST).write_text("{}")
    code, _, err = cli(capsys, "show", folder)
    assert code == 2 and err.count("skipped the broken run") == 3 and "no readable runs" in err


@pytest.mark.parametrize("where", ["nosuch", "empty"])
def test_show_of_nothing_says_what_to_give(tmp_path, capsys, where):
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "show", tmp_path / where)
    assert code == 2 and ("does not exist; give an existing folder" in err or "no readable runs" in err)


# ---------------------------------------------------------------- the statuses and the manifest writes


def test_every_status_a_run_writes_is_in_the_documented_table(three_runs):
    for run in find_runs(three_runs):
        manifest = run.read_manifest()
        assert manifest.status in RUN_STATUSES
        assert all(entry.outcome.status in JOB_STATUSES for entry in manifest.jobs)
    assert all(RUN_STATUSES.values()) and all(JOB_STATUSES.values())  # each one explained


def test_a_manifest_on_a_full_disk_is_rewritten_in_its_own_space_or_kept_whole(tmp_path):
    """The temp file on a full disk (/dev/full): an update that fits in the manifest's own disk blocks is written
    there; one that does not fit fails naming the manifest, which stays whole. No temp file is left either way."""
    run = RunDir.create(tmp_path, "exp", "naive-x1-r0")
    run.write_manifest(Manifest.from_dict({"status": "running", "mode": {"name": "naive"}, "jobs": []}))
    (run.path / f".{MANIFEST}.{os.getpid()}.tmp").symlink_to("/dev/full")  # atomic.py's temp file
    run.update_manifest(status="complete")
    assert run.read_manifest().status == "complete"
    (run.path / f".{MANIFEST}.{os.getpid()}.tmp").symlink_to("/dev/full")  # atomic.py's temp file
    with pytest.raises(OSError, match="No space left on device") as raised:
        run.update_manifest(status="failed_jobs", problems=["x" * 100_000])
    assert raised.value.filename == str(run.path / MANIFEST)
    assert run.read_manifest().status == "complete"
    assert [p.name for p in run.path.iterdir()] == [MANIFEST]


def test_run_directories_stay_inside_out(tmp_path):
    for hostile in ("..", "../..", ".", "a/../../b", "..\\.."):
        run = RunDir.create(tmp_path / "out", hostile, hostile)
        assert tmp_path / "out" in run.path.resolve().parents


def test_the_python_api_refuses_a_results_folder_that_is_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    with pytest.raises(BadInput, match="is a file, not a folder"):
        colloc_kit.run([TINY_JOB], out=afile, monitor=False, progress=False)
    assert afile.read_text() == "keep me"


@pytest.mark.parametrize("gpu", ["3", "99999999999999999999"])
def test_a_gpu_index_the_machine_lacks_is_refused_before_anything_starts(tmp_path, capsys, gpu):
    """On a stand-in NVML (labelled: tests/fake_nvml.py) with one GPU, --gpu 3 is refused; no worker is started."""
    flags = [f if f != "cpu" else "cuda" for f in TINY_FLAGS]  # --device cuda
    with nvml.use_backend(FakeNvml(gpus=1)):
        err = refused(capsys, tmp_path, "run", *flags, "--gpu", gpu, "--out", tmp_path)
    assert f"GPU {gpu} does not exist: this machine has 1 GPU(s)" in err and "give --gpu 0" in err


# ---------------------------------------------------------------- third pass: liveness that cannot be fooled


@pytest.fixture(scope="module")
def one_done_cell_made(tmp_path_factory) -> Path:
    """The folder holding `live`, a real experiment folder with one complete cell, run once for the module in this
    process (`colloc-kit run` through main(), as cli() runs it); each test takes a copy (one_done_cell)."""
    out = tmp_path_factory.mktemp("one-done-cell")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main([str(a) for a in ("run", *TINY_FLAGS, "--name", "live", "--out", out)])
    assert "Traceback" not in printed.getvalue(), printed.getvalue()
    assert code == 0
    return out


@pytest.fixture
def one_done_cell(tmp_path, one_done_cell_made) -> tuple[Path, RunDir]:
    """A real experiment folder `live` under tmp_path with one complete cell (run in this process): a copy of the
    module's one run, which each test may rewrite."""
    shutil.copytree(one_done_cell_made / "live", tmp_path / "live")
    (run,) = find_runs(tmp_path / "live")
    return tmp_path, run


def _as_running(run: RunDir, pid: int, runner_started_at: float | None, started_at: float | None = None) -> None:
    """Rewrite the run's manifest as a run killed mid-way by a runner `pid` would have left it."""
    data = json.loads((run.path / MANIFEST).read_text())
    data.update(status="running", ended_at=None, runner_pid=pid, runner_started_at=runner_started_at)
    if runner_started_at is None:
        del data["runner_started_at"]  # a manifest of an older kit
    if started_at is not None:
        data["started_at"] = started_at
    (run.path / MANIFEST).write_text(json.dumps(data))


@pytest.mark.slow
def test_a_run_records_its_runner_by_pid_and_start_time(one_done_cell):
    _, run = one_done_cell
    manifest = run.read_manifest()
    assert manifest.runner_pid == os.getpid()  # run in this process
    assert manifest.runner_started_at == pytest.approx(psutil.Process().create_time(), abs=0.01)


@pytest.mark.slow
def test_a_live_runner_holds_its_cell(one_done_cell, capsys):
    out, run = one_done_cell
    _as_running(run, *this_runner())
    code, printed, _ = cli(capsys, "status", out / "live")
    assert code == 0 and re.search(r"\brunning\b", printed.splitlines()[1])
    code, _, err = cli(capsys, "run", *TINY_FLAGS, "--name", "live", "--out", out)
    assert code == 0 and "being run by another process" in err and len(find_runs(out / "live")) == 1


@pytest.mark.parametrize("recorded", [True, False], ids=["start time recorded", "manifest of an older kit"])
@pytest.mark.slow
def test_a_dead_runners_pid_taken_by_another_process_does_not_hold_its_cell(one_done_cell, capsys, recorded):
    """Before: `status` said running for good and every rerun skipped the cell. Now the pid's process must have
    started when the runner did (or, for an older manifest, before the run did): a stranger that took the pid
    later does not count, the run reads as interrupted and the cell runs again."""
    out, run = one_done_cell
    manifest = run.read_manifest()
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # born after the runner died
    try:
        _as_running(run, stranger.pid, manifest.runner_started_at if recorded else None,
                    started_at=manifest.started_at - 60)
        code, printed, _ = cli(capsys, "status", out / "live")
        row = printed.splitlines()[1]
        assert code == 0 and "running" not in row and "failed" in row and "interrupted" in row
        assert colloc_kit.load(out / "live").runs["status"].tolist() == ["interrupted"]
        code, _, err = cli(capsys, "run", *TINY_FLAGS, "--name", "live", "--out", out)
        assert code == 0 and "another process" not in err
        assert [effective_status(r.read_manifest()) for r in find_runs(out / "live")] == ["interrupted", "complete"]
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.parametrize("pid", [None, 0, -5, "12", 2**40, True], ids=repr)
@pytest.mark.slow
def test_a_runner_pid_no_process_can_have_reads_as_dead(one_done_cell, capsys, pid):
    out, run = one_done_cell
    data = json.loads((run.path / MANIFEST).read_text())
    data.update(status="running", runner_pid=pid)
    (run.path / MANIFEST).write_text(json.dumps(data))
    assert colloc_kit.load(out / "live").runs["status"].tolist() == ["interrupted"]


# ---------------------------------------------------------------- third pass: data make, supervised like the runs


@pytest.mark.parametrize("jobs", ["-1", "0", str(len(os.sched_getaffinity(0)) + 1), "100000"])
def test_data_make_parallelism_is_bounded_by_the_cores(tmp_path, capsys, jobs):
    err = refused(capsys, tmp_path, "data", "make", "cifar10", "--root", tmp_path / "d", "--images", "20",
                  "--jobs", jobs, "--quiet")
    assert f"--jobs must be a whole number from 1 to {len(os.sched_getaffinity(0))}" in err
    assert not (tmp_path / "d").exists()


def test_data_make_names_a_file_where_a_class_folder_goes_before_writing(tmp_path, capsys):
    train = tmp_path / "d" / "cifar10" / "train"
    train.mkdir(parents=True)
    (train / "cat").write_text("keep me")
    err = refused(capsys, tmp_path, "data", "make", "cifar10", "--root", tmp_path / "d", "--images", "20", "--quiet")
    assert f"{train / 'cat'} is a file where the folder of class cat should be; move it away" in err
    assert [p.name for p in train.iterdir()] == ["cat"] and (train / "cat").read_text() == "keep me"


def _data_make(root: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A `colloc-kit data make` of full-size ImageNet JPEGs in a process of its own, once its two writers write."""
    cmd = [sys.executable, "-m", "colloc_kit.cli", "data", "make", "imagenet", "--root", str(root), "--images",
           "200000", "--jobs", "2", "--quiet"]
    kit = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not next((root / "imagenet" / "train").rglob("*.JPEG"), None):
        assert time.monotonic() < deadline and kit.poll() is None, kit.stderr.read() if kit.stderr else ""
        time.sleep(0.1)
    writers = psutil.Process(kit.pid).children()
    assert len(writers) == 2
    return kit, writers


@pytest.mark.slow
def test_data_make_writers_die_with_a_sigkilled_make(tmp_path):
    """Before: the writers lived on, detached. Now each is sent SIGKILL as its parent dies (PR_SET_PDEATHSIG)."""
    kit, writers = _data_make(tmp_path)
    alive = survivors_of_killed_kit(kit, writers, timeout=10)
    assert not alive, f"{len(alive)} writer(s) outlived the SIGKILLed data make"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_data_make_stopped_exits_130_with_its_writers(tmp_path, sig):
    kit, writers = _data_make(tmp_path)
    kit.send_signal(sig)
    _, err = kit.communicate(timeout=60)
    _, alive = psutil.wait_procs(writers, timeout=5)
    assert kit.returncode == 130 and not alive
    assert err == "colloc-kit: interrupted; the images written are kept: the same command again finishes the dataset\n"


def test_data_make_whose_writer_is_killed_exits_1_without_hanging(tmp_path):
    kit, writers = _data_make(tmp_path)
    writers[0].kill()
    _, err = kit.communicate(timeout=60)
    _, alive = psutil.wait_procs(writers, timeout=5)
    assert kit.returncode == 1 and not alive and "Traceback" not in err
    assert "a process writing the images died" in err and "run the command again" in err


# ---------------------------------------------------------------- third pass: damaged monitor files hide no run


def _monitor_file_is_a_folder(run: RunDir) -> None:
    (run.monitor_dir / "samples_host.parquet").unlink()
    (run.monitor_dir / "samples_host.parquet").mkdir()


def _parquet_without_times(run: RunDir) -> None:
    pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(run.monitor_dir / "samples_host.parquet")


DAMAGED = {
    "garbage parquet": (_write("monitor/samples_host.parquet", b"PAR1 this is not parquet at all"),
                        "monitor/samples_host.parquet cannot be read (ArrowInvalid"),
    "parquet is a folder": (_monitor_file_is_a_folder, "monitor/samples_host.parquet is not a file"),
    "parquet without sample times": (_parquet_without_times, "monitor/samples_host.parquet has no sample times"),
    "monitor.json not JSON": (_write("monitor/monitor.json", "{not json"),
                              "monitor/monitor.json cannot be read as JSON"),
    "monitor.json not UTF-8": (_write("monitor/monitor.json", b"\xff\xfe{"), "monitor/monitor.json cannot be read"),
    "monitor.json a list": (_write("monitor/monitor.json", "[1, 2]"), "monitor/monitor.json holds a JSON list"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_run_with_damaged_monitor_files_reads_with_its_jobs_and_names_the_file(tmp_path, capsys, three_runs, case):
    """Before: the whole run was hidden from `show` and `load()` (and the monitor.json message named no file)."""
    damage, says = DAMAGED[case]
    folder, damaged, _ = _runs_with(tmp_path, three_runs, damage)

    code, printed, err = cli(capsys, "show", folder)
    assert code == 1 and f"the run {damaged.path} is read in part: {damaged.path}/{says}" in err, err
    assert printed.count("j0-smallcnn") == 3

    for results in (colloc_kit.load(folder), colloc_kit.load(folder, strict=True)):
        assert len(results.runs) == 3 and not results.broken
        assert (results.jobs["status"] == COMPLETE).all() and (results.jobs["images_per_s"] > 0).all()
        assert list(results.damaged) == [str(damaged.path)] and says in results.damaged[str(damaged.path)]
        problems = results.runs.set_index("run_id").loc[damaged.run_id, "problems"]
        assert f"{damaged.path}/{says}" in problems


# ---------------------------------------------------------------- third pass: status on a damaged experiment folder


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    """A real experiment folder of two complete cells (one tiny CPU job each)."""
    out = tmp_path_factory.mktemp("experiment")
    colloc_kit.run([TINY_JOB], mode="naive", repeats=2, out=out, name="exp", monitor=False, progress=False)
    return out / "exp"


def _torn_first_manifest(folder: Path) -> Path:
    path = find_runs(folder)[0].path / MANIFEST
    path.write_text(path.read_text()[:40])
    return path


def _put(relative: str, text: str | None):
    def damage(folder: Path) -> Path:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if text is None else path.write_text(text)
        return path
    return damage


FOLDER_DAMAGE = {
    "a broken spec file": (_put("specs/zz.json", "{not json"), "cannot be read as JSON"),
    "a stray JSON file in specs/": (_put("specs/zz.json", '{"a": 1}'), "cannot be read as an experiment spec"),
    "a folder named like a spec": (_put("specs/zz.json", None), "cannot be read as JSON (Is a directory)"),
    "a damaged submitted.json": (_put("slurm/submitted.json", "[1"), "cannot be read as JSON"),
    "a not-run.json that is not an object": (_put("not-run.json", "null"), "holds a JSON NoneType, not dict"),
    "a torn run manifest": (_torn_first_manifest, "cannot be read as JSON"),
}


@pytest.mark.parametrize("case", list(FOLDER_DAMAGE))
def test_status_of_a_damaged_experiment_folder_shows_its_cells_and_names_the_file(tmp_path, capsys, experiment,
                                                                                  case):
    """Before: a broken spec file was a JSON traceback, a stray valid one refused the folder without naming it."""
    damage, says = FOLDER_DAMAGE[case]
    folder = tmp_path / "exp"
    shutil.copytree(experiment, folder)
    path = damage(folder)
    code, printed, err = cli(capsys, "status", folder)
    assert code == 1 and f"colloc-kit: {path} {says}" in err, err
    assert "done" in printed and "naive-x1-r1" in printed


def test_a_run_into_a_folder_with_a_torn_manifest_names_it_before_measuring_its_cell_anew(tmp_path, capsys,
                                                                                           experiment):
    """Before: a rerun replaced a run with a truncated manifest without naming it (issue 53)."""
    folder = tmp_path / "exp"
    shutil.copytree(experiment, folder)
    path = _torn_first_manifest(folder)
    code, _, err = cli(capsys, "run", *TINY_FLAGS, "--name", "exp", "--out", tmp_path)
    assert code == 0 and f"colloc-kit: warning: {path} cannot be read as JSON" in err, err


def test_a_folder_1500_levels_deep_is_walked_without_recursion(tmp_path, capsys, three_runs):
    """Before: a RecursionError traceback in `show` and `status`. Now the walk keeps a list; a run at the bottom is
    found."""
    deep = bottom = tmp_path / "deep"
    try:
        deep.mkdir()
        for _ in range(1500):  # not mkdir(parents=True): pathlib recurses there too
            bottom = bottom / "d"
            bottom.mkdir()
        run = find_runs(three_runs)[0]
        shutil.copytree(run.path, bottom / run.run_id)
        code, printed, _ = cli(capsys, "show", deep)
        assert code == 0 and printed.count("j0-smallcnn") == 1
        code, printed, _ = cli(capsys, "status", deep)
        assert code == 0 and "done" in printed
    finally:  # rm walks without recursion; pytest's own clean-up (shutil.rmtree) recurses and would fail on it
        subprocess.run(["rm", "-rf", str(deep)], check=True)


# ---------------------------------------------------------------- third pass: one check of every folder a command takes


def _folder_commands(tmp_path: Path) -> dict[str, tuple[bool, callable]]:
    """Each command that takes a folder: (whether it writes there, argv for folder P)."""
    out = tmp_path / "out"
    return {
        "run --out": (True, lambda p: ["run", *TINY_FLAGS, "--out", p]),
        "demo --out": (True, lambda p: ["demo", "--out", p]),
        "run --data-root": (False, lambda p: ["run", *TINY_FLAGS, "--dataset", "imagefolder", "--data-root", p,
                                              "--out", out]),
        "data make --root": (True, lambda p: ["data", "make", "cifar10", "--root", p, "--images", "20", "--quiet"]),
        "batch --out": (True, lambda p: ["batch", "--out", p, "--only", "01"]),
        "batch --notebooks": (False, lambda p: ["batch", "--notebooks", p, "--out", out]),
        "status": (False, lambda p: ["status", p]),
        "show": (False, lambda p: ["show", p]),
        "advise --runs": (False, lambda p: ["advise", "seed-37", "--runs", p]),
        "advise --confirm --out": (True, lambda p: ["advise", "seed-37", "--confirm", "1", "--out", p]),
        "reference export": (False, lambda p: ["reference", "export", p, "--name", "x", "--to", out]),
        "reference export --to": (True, lambda p: ["reference", "export", tmp_path, "--name", "x", "--to", p]),
    }


def _afile(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("keep me")
    return tmp_path / "afile"


def _not_utf8(tmp_path: Path) -> Path:
    folder = tmp_path / "caf\udce9"  # the bytes b"caf\xe9" (Latin-1), as Python hands them over
    folder.mkdir()
    return folder


PATH_PROBLEMS = {
    "not UTF-8": (_not_utf8, "is not UTF-8 text"),
    "a file": (_afile, "is a file, not a folder"),
    "under a file": (lambda t: _afile(t) / "sub", "afile is a file, not a folder"),
    "a name too long": (lambda t: t / ("n" * 300), "is 300 bytes long; this file system takes at most 255"),
    "a path too long": (lambda t: t.joinpath(*["d" * 200] * 25), "bytes long; a path has at most 4,095"),
    "empty": (lambda t: "", "is empty; give a folder"),
}


@pytest.mark.parametrize("problem", list(PATH_PROBLEMS))
@pytest.mark.parametrize("command", list(_folder_commands(Path("."))))
def test_every_folder_a_command_takes_is_checked_before_anything_starts(tmp_path, capsys, command, problem):
    """Before: exit 1 'free space or fix the folder's permissions' (one message 5 KB), or a run that ran and then
    crashed printing where it was stored. Now: exit 2, what is wrong and what to do, a short message, nothing made."""
    _, argv = _folder_commands(tmp_path)[command]
    make, says = PATH_PROBLEMS[problem]
    path = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    err = refused(capsys, tmp_path, *argv(path))
    assert says in err and len(err) < 600, err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written
    if problem in ("a file", "under a file"):
        assert (tmp_path / "afile").read_text() == "keep me"


@pytest.mark.parametrize("command", [c for c, (writes, _) in _folder_commands(Path(".")).items() if writes])
def test_a_read_only_folder_is_refused_by_every_command_that_writes(tmp_path, capsys, command):
    folder = tmp_path / "ro"
    if not mounted_tmpfs(folder, "ro,size=1m"):
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        _, argv = _folder_commands(tmp_path)[command]
        err = refused(capsys, tmp_path, *argv(folder / "new"))
        assert f"cannot write in {folder}" in err and "give a folder you can write to" in err
    finally:
        unmount(folder)


# ---------------------------------------------------------------- third pass: plug-ins loaded safely


MODE_PLUGIN = '''
from colloc_kit.modes import NaiveMode, Option


class OddMode(NaiveMode):
    """An odd mode."""

    name = {name}
    takes = {takes}
'''
PLUGINS = {
    "sys.exit(0) at import": ("import sys\nsys.exit(0)\n", "which did not load (called sys.exit(0))"),
    "sys.exit('bye') at import": ("import sys\nsys.exit('bye')\n", "which did not load (called sys.exit('bye'))"),
    "a BaseException at import": ("raise BaseException('odd')\n", "which did not load (BaseException: odd)"),
    "a mode named 5": (MODE_PLUGIN.format(name="5", takes="()"), "is named 5; a mode's name is a word"),
    "a mode named ''": (MODE_PLUGIN.format(name="''", takes="()"), "is named ''; a mode's name is a word"),
    "a mode named 'a,b'": (MODE_PLUGIN.format(name="'a,b'", takes="()"), "is named 'a,b'"),
    "an option named 'Bad Name'": (MODE_PLUGIN.format(name="'odd'", takes="(Option('Bad Name', int, 'h'),)"),
                                   "takes an option named 'Bad Name'"),
    "takes that is a number": (MODE_PLUGIN.format(name="'odd'", takes="5"), "TypeError"),
    "a mode named like a built-in": (MODE_PLUGIN.format(name="'naive'", takes="()"), "two sharing modes are named"),
}


@pytest.mark.parametrize("case", list(PLUGINS))
def test_a_plugin_that_misbehaves_exits_2_naming_it(tmp_path, case):
    """Before: `sys.exit(0)` in a plug-in made `colloc-kit run` exit 0 having run nothing; a mode named 5 was a
    TypeError traceback."""
    source, says = PLUGINS[case]
    plugin = tmp_path / "odd_plugin.py"
    plugin.write_text(source)
    done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", "run", *TINY_FLAGS, "--out", str(tmp_path / "out")],
                          env={**os.environ, "COLLOC_KIT_MODES": str(plugin)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"colloc-kit: COLLOC_KIT_MODES names '{plugin}'") and says in done.stderr
    assert len(done.stderr.splitlines()) == 1 and not (tmp_path / "out").exists()


# ---------------------------------------------------------------- third pass: Ctrl-C at any moment


@pytest.mark.parametrize("entry", [["-m", "colloc_kit.cli"],
                                   ["-c", "import sys; from colloc_kit.cli.command import main; sys.exit(main())"]],
                         ids=["python -m colloc_kit.cli", "the console script"])
@pytest.mark.parametrize("loaded", ["argparse", "pandas", "colloc_kit.experiments.seed"])
def test_ctrl_c_while_the_kit_loads_exits_130_with_one_line(entry, loaded):
    """Before: a traceback and exit -2 in the first half second of any command. `-X importtime` says when each module
    has loaded: SIGINT goes in right after `loaded`, while the rest still loads."""
    kit = subprocess.Popen([sys.executable, "-X", "importtime", *entry, "info"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    sent = False
    assert kit.stderr is not None
    for line in kit.stderr:
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == loaded:
            kit.send_signal(signal.SIGINT)
            sent = True
            break
    rest = kit.stderr.read()
    kit.wait(timeout=120)
    said = [line for line in rest.splitlines() if not line.startswith("import time:")]
    assert sent, f"{loaded} was never imported"
    assert kit.returncode == 130 and said == ["colloc-kit: interrupted"], (kit.returncode, said)


# ---------------------------------------------------------------- third pass: weak messages


@pytest.mark.parametrize("argv", [["show", "{runs}"], ["status", "{runs}/experiment"]], ids=["show", "status"])
@pytest.mark.slow
def test_a_closed_stdout_pipe_is_not_reported_as_a_full_disk(tmp_path, three_runs, argv):
    """`colloc-kit status X | head -0`: the reader is gone before anything is printed. Nothing to say and no one to
    say it to: no message, exit 141 (128 + SIGPIPE, as a shell reports a command that wrote into a closed pipe)."""
    runs = tmp_path / "runs"
    shutil.copytree(three_runs, runs)
    kit = subprocess.Popen([sys.executable, "-m", "colloc_kit.cli", *(a.format(runs=runs) for a in argv)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert kit.stdout is not None
    kit.stdout.close()
    _, err = kit.communicate(timeout=120)
    assert kit.returncode == 141 and err == ""


@pytest.mark.parametrize("number, says", [
    (errno.ENOSPC, "free space"), (errno.EROFS, "fix the folder's permissions"),
    (errno.ENAMETOOLONG, "give a shorter name"), (errno.ENOTDIR, "a file stands where a folder should be"),
    (errno.EAGAIN, "the system refused a process, memory or a file"), (errno.EMFILE, "`ulimit -u` or `-n`"),
    (errno.EIO, "fix the cause"),
])
def test_a_system_error_during_a_command_says_what_it_means(tmp_path, capsys, monkeypatch, number, says):
    def broken(path):
        raise OSError(number, os.strerror(number), str(tmp_path / "x"))

    monkeypatch.setattr("colloc_kit.cli.main.experiment_status", broken)
    code, _, err = cli(capsys, "status", tmp_path)
    assert code == 1 and says in err and os.strerror(number) in err and str(tmp_path / "x") in err
    if number != errno.ENOSPC:
        assert "free space" not in err


@pytest.mark.parametrize("only", ["", ".ipynb", "zz"])
def test_batch_only_that_matches_nothing_names_the_notebooks(tmp_path, capsys, only):
    err = refused(capsys, tmp_path, "batch", "--only", only, "--out", tmp_path / "b")
    assert "no such notebook" in err and "01_gpu_tour" in err and not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv, says", [
    (["run", *TINY_FLAGS, "--mode=", "--out", "{tmp}"], "needs at least one mode; give e.g. --mode naive"),
    (["run", *TINY_FLAGS, "--out="], "results folder (--out) is empty"),
    (["batch", "--profile", "", "--out", "{tmp}/b"], "unknown batch profile ''"),
    (["data", "make", "cifar10", "--root", "{tmp}/d", "--jobs", "0"], "--jobs must be a whole number from 1"),
    (["advise", "seed-37", "--seconds", "0", "--confirm", "1", "--out", "{tmp}"], "--seconds must be a positive"),
    (["advise", "seed-37", "--runs", ""], "lone runs folder (--runs) is empty"),
    (["advise", "seed-37", "--reference", ""], "--reference is empty"),
])
def test_an_invalid_value_is_refused_not_replaced_by_the_default(tmp_path, capsys, argv, says):
    err = refused(capsys, tmp_path, *(a.format(tmp=tmp_path) for a in argv))
    assert says in err


BIG = "m" * 100_000


@pytest.mark.parametrize("argv", [
    ["run", *TINY_FLAGS, "--model", BIG], ["run", *TINY_FLAGS, "--mode", BIG], ["run", *TINY_FLAGS, "--steps", BIG],
    ["run", *TINY_FLAGS, "--name", BIG], ["run", BIG], ["show", BIG], ["status", BIG], ["batch", "--only", BIG],
    ["batch", "--profile", BIG], ["mig", "plan", BIG, "--gpu", "H100-80GB"], ["data", "make", "cifar10", "--root", BIG],
    ["reference", "export", "{tmp}", "--name", BIG],
], ids=lambda argv: " ".join(a if a != BIG else "<100 KB>" for a in argv if a not in TINY_FLAGS))
def test_a_100_kb_value_gets_a_short_message(tmp_path, capsys, argv):
    """Before: the whole 100 KB value came back in the message."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + (["--out", tmp_path] if argv[0] == "run" else [])
    code, _, err = cli(capsys, *argv)
    assert code == 2 and len(err.splitlines()[-1]) < 600, err[-600:]


@pytest.mark.parametrize("line, says", [
    ("repeats: x", "repeats must be a positive integer, got 'x'"),
    ("repeats: 1.5", "repeats must be a positive integer"),
    ("seconds: -1", "seconds must be a positive number"),
    ("seconds: x", "seconds must be a positive number"),
    ("warmup_steps: 1.5", "warmup_steps must be a whole number"),
    ("data_root: 5", "data_root must be a folder path"),
    ("gpu: x", "gpu must be a GPU index"),
    ("monitor_interval_s: 0", "monitor_interval_s must be a positive number"),
    ("name: '..'", "name must be a folder name"),
    ("amp: fp8", "amp must be one or a list of"),
])
def test_a_seed_spec_with_a_value_of_the_wrong_kind_is_refused(tmp_path, capsys, line, says):
    """Before: `repeats: x` was a TypeError traceback (the plan multiplied by it)."""
    spec = write_spec(tmp_path, f"seed: 33\n{line}\n")
    for plan in ([], ["--plan"]):
        assert says in refused(capsys, tmp_path, "run", spec, "--out", tmp_path, *plan)


@pytest.mark.slow
def test_jobs_that_reported_their_end_stay_complete_when_the_zygote_is_killed(tmp_path):
    """Killing the preloaded zygote mid-run: its jobs run on and report; each is recorded from its own events
    (complete, its images/s kept), and the run names what happened to the zygote."""
    job = dict(model="smallcnn", device="cpu", batch_size=8, image_size=16, workers=0, warmup_steps=2,
               interval_s=0.1, synthetic_samples=64, seconds=4)

    def kill_the_zygote():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            streams = list(tmp_path.rglob("*.events.jsonl"))
            if len(streams) == 2 and all('"start"' in p.read_text() for p in streams):
                for child in psutil.Process().children(recursive=True):
                    if "colloc_kit.worker.zygote" in " ".join(child.cmdline()):
                        child.kill()
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_zygote, daemon=True)
    killer.start()
    results = colloc_kit.run([job], mode="naive", copies=[2], out=tmp_path, monitor=False, progress=False)
    killer.join()
    assert list(results.jobs["status"]) == ["complete", "complete"]
    assert (results.jobs["images_per_s"] > 0).all()
    (run,) = find_runs(tmp_path)
    assert any("the zygote" in problem for problem in run.read_manifest().problems)


def test_stopping_a_job_that_died_with_a_line_still_buffered_for_it_closes_its_pipes_without_an_error(tmp_path):
    """A job gone before it read what the launcher wrote to it (a feed swap it refused at once, under load): closing
    its stdin flushes into a pipe nobody reads; the launcher's stop closes it all the same, no BrokenPipeError."""
    from colloc_kit.pipeline import launched, launcher  # noqa: PLC0415 - its private stop, the one place closing pipes

    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.wait(timeout=30)
    proc.stdin.write(b"swap\n")  # buffered: the flush at close meets the closed pipe
    job = launched.LaunchedJob(item=None, proc=proc, events_path=tmp_path / "events.jsonl")
    launcher._stop_all([job])
    assert proc.stdin.closed and proc.stdout.closed

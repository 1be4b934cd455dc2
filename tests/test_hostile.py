"""Hostile input and injected faults, on the CPU: the CLI's contract holds in every case.

Each case asserts the exit code (0 complete, 1 some job failed or a run broke, 2 bad input with nothing started,
130 interrupted), that the message says what to do, that no traceback reaches the user, that nothing was started
where nothing should be (no run folder), that no worker process is left (an autouse fixture), and that no completed
result is lost or hidden. Everything is real: real worker processes, real files, a real full disk (/dev/full, and a
64 KiB tmpfs where this machine can mount one), real permissions (a process that gave up root where needed).
"""

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

import psutil
import pytest
import yaml  # noqa: F401 - imported before a test forks a child that gives up root (it could not import then)
from fake_datasets import write_imagefolder
from fake_nvml import FakeNvml
from processes import survivors_of_killed_kit

import colloc_kit
import colloc_kit.pipeline  # noqa: F401 - the same
from colloc_kit.cli import main
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.gpu import nvml
from colloc_kit.launcher import LaunchItem, Wave
from colloc_kit.manifest import Manifest
from colloc_kit.modes import Slot
from colloc_kit.rundir import MANIFEST, RunDir, find_runs
from colloc_kit.spec import JobSpec
from colloc_kit.statuses import COMPLETE, FAILED, JOB_STATUSES, RUN_STATUSES

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
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "colloc_kit.worker" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


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
    (["--copies", "0"], "copies must be positive"),
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
    (["--copies", "abc"], "expected comma-separated int values"),
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
    (os.urandom(64) + b"\xff\xfe", "is not UTF-8 text"),
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
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: abc\n", "'copies' must be a number or a list"),
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: 100\n", "at most 48"),
    ("jobs: [{model: smallcnn, device: cpu}]\ncopies: [true]\n", "copies must be positive integers"),
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


def test_a_name_with_spaces_prints_the_folder_that_exists(tmp_path, capsys):
    out = tmp_path / "my runs"
    code, printed, _ = cli(capsys, "run", *TINY_FLAGS, "--name", "my study", "--out", out)
    assert code == 0
    folder = re.search(r"stored under (.+?) ; read with", printed).group(1)
    assert Path(folder).is_dir() and Path(folder).parent == out
    assert len(colloc_kit.load(folder).jobs) == 1


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


def test_an_event_log_that_cannot_be_opened_fails_its_job_without_hanging(tmp_path):
    wave = _wave(tmp_path, 2, steps=4)
    (wave.jobs_dir / "j0.events.jsonl").mkdir(parents=True)
    outcomes = {o.job_id: o for o in wave.run()}
    assert outcomes["j1"].status == COMPLETE
    assert outcomes["j0"].status == FAILED and "could not write" in outcomes["j0"].error
    assert "Is a directory" in outcomes["j0"].error


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


def test_workers_die_with_a_sigkilled_kit(tmp_path):
    """Workers that write nothing for a minute (no event would hit the dead pipe) still die with the kit: their stdin
    closes with it, and a worker leaves when its stdin closes."""
    cmd = [sys.executable, "-m", "colloc_kit.cli", "run", *TINY_FLAGS, "--steps", "1000000", "--copies", "2",
           "--synthetic-samples", "8000000", "--interval-s", "60", "--out", str(tmp_path)]
    kit = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sum('"start"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")) < 2:
        assert time.monotonic() < deadline and kit.poll() is None
        time.sleep(0.2)
    workers = worker_processes()
    assert len(workers) == 2
    alive = survivors_of_killed_kit(kit, workers, timeout=10)
    assert not alive, f"{len(alive)} worker(s) outlived the SIGKILLed kit"


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


def _garbage_parquet(run: RunDir) -> None:
    (parquet,) = run.monitor_dir.glob("samples_host.parquet")
    parquet.write_bytes(b"PAR1 this is not parquet at all")


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
    "garbage parquet": (_garbage_parquet, "ArrowInvalid"),
    "monitor.json not JSON": (_write("monitor/monitor.json", "{not json"), "JSONDecodeError"),
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
    assert code == 2 and ("give a run directory" in err or "no readable runs" in err)


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

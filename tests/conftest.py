"""Shared test setup: the `gpu` marker skips tests on machines without a CUDA GPU, with the reason; the cpu-smoke batch
that the batch and browser tests read, each teacher copy's first run and one MLflow server are made once per session;
SIGINT raises KeyboardInterrupt in every test, however the run was started and whatever the test before it did."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow_server import server
from processes import WorkerZygote

from colloc_kit.batch import runner as batch
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.views import deferred_iri

# Test modules import nbformat (and so jsonschema) as they are collected, in each worker: with jsonschema's IRI
# grammar deferred as the kit's kernels and batches defer it (`views.deferred_iri`), collecting costs each worker
# seconds less of CPU (the grammar was the largest import of a worker's collection). Before any test module loads.
deferred_iri.defer()

# The suite's two workers share two cores with the kit's jobs they start, so a job's OpenMP threads that spin while
# they wait for work (GNU OpenMP's default) burn the CPU that the other worker's jobs need; passive ones sleep. Set
# before torch loads here, and inherited by every kit, zygote and job the tests start (test_lanes.py: 9 % less CPU).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Python keeps the bytecode it compiles, its default: where PYTHONDONTWRITEBYTECODE is set (the shells of the
# machines this suite was measured on set it), every kernel, zygote, lane and kit command the suite starts compiled
# the kit's modules from source again (about 0.6 s of CPU a process importing the kit's commands, pipeline and
# findings), and each worker its test modules' rewritten asserts.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BATCH_FOLDER = ROOT / "batch-runs"  # where the README's `colloc-kit batch` writes


def _cuda_reason() -> str | None:
    try:
        import torch  # noqa: PLC0415 - a failing import is a skip reason here
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        return f"torch not importable: {exc}"
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine"
    return None


def pytest_configure(config):
    """A run started in the background of a script (`bash .ci/run > log &`, nohup ... &) inherits SIGINT ignored:
    shells start such commands so. The interrupt tests send SIGINT to this process (what Ctrl-C or Kernel > Interrupt
    sends) and to the kits they start, which would inherit the ignoring; give it Python's own handler back."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def runs_share_one_zygote(request):
    """The kit's runs in this test process's own thread share one zygote (`processes.WorkerZygote`) instead of each
    starting one: torch and the jobs' code imported once per test process, not once per experiment (about 5 s of CPU
    each, 139 zygotes in session 27's suite). The block's kept launch (`pipeline.warm`) ends with the test, not with
    a lane. A test about the start and end of a zygote or of a lane's kept launch (`@pytest.mark.own_zygote`) gets
    none: its runs and lanes start and end their own."""
    if request.node.get_closest_marker("own_zygote"):
        yield
        return
    with shared_zygote(WorkerZygote.get()):
        yield


@pytest.fixture(autouse=True)
def sigint_as_before():
    """Every test leaves SIGINT as it found it: a panel routes SIGINT to its background runs for good (as it must in a
    kernel), and a background run still going after its test would take the next test's SIGINT for a Stop. One left
    is stopped, then reported."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)
    background = sys.modules.get("colloc_kit.notebook.background")
    left = background.stop_all() if background else 0
    deadline = time.monotonic() + 30
    while left and background.stop_all() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"{left} background run(s) still going after the test (stopped now)"


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """GPU tests skipped without a GPU, with the reason; each test that shares a fixture wider than itself placed
    with the others that share it (`xdist_group`), so that pytest-xdist's workers (`--dist loadgroup`) build each
    such fixture once: a session fixture's users in one group (the cpu-smoke batch), a module fixture's in its
    module's group (a JupyterLab, an MLflow server); every other test goes wherever a worker is free."""
    reason = None
    for item in items:
        shared = sorted(f"{d[-1].scope}-{name}" if d[-1].scope == "session" else f"module-{item.module.__name__}"
                        for name, d in item._fixtureinfo.name2fixturedefs.items()
                        if d and d[-1].scope in ("session", "module") and d[-1].baseid)  # ours, not a plugin's
        if shared and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(shared[-1]))  # "session-..." sorts after "module-..."
        if item.get_closest_marker("gpu"):  # not `"gpu" in item.keywords`: that matches the colloc_kit/gpu/ folder
            reason = reason or _cuda_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


@pytest.fixture
def has_mps_control() -> bool:
    return shutil.which("nvidia-cuda-mps-control") is not None


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """The whole cpu-smoke profile, run once for the session (a few minutes on a 2-core CPU) as a user runs it: the
    `colloc-kit batch` of this Python's environment, from the checkout's root, into its default `batch-runs/`; the
    folder it made is then moved out of the checkout, and read back from its batch.json."""
    before = set(DEFAULT_BATCH_FOLDER.glob("*")) if DEFAULT_BATCH_FOLDER.is_dir() else set()
    done = subprocess.run([str(Path(sys.executable).with_name("colloc-kit")), "batch", "--profile", "cpu-smoke"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200)
    (made,) = set(DEFAULT_BATCH_FOLDER.glob("*")) - before
    folder = Path(shutil.move(made, tmp_path_factory.mktemp("batch") / made.name))
    record = json.loads((folder / "batch.json").read_text())
    record["notebooks"] = [batch.NotebookOutcome(**n) for n in record.pop("notebooks")]
    report = batch.BatchReport(folder=folder, **record)
    assert done.returncode == (1 if report.failed else 0), done.stderr[-3000:]
    return report


@pytest.fixture(scope="session")
def teacher_first_runs(tmp_path_factory):
    """Each teacher copy (notebooks/course/solutions/) run once for the session, headless as `colloc-kit batch` runs
    it, its runs in a folder of its own: `teacher_first_runs(path)` gives (outcome, the folder it ran in, the
    parameters). The course-sheet test reads this run; the teacher-copy test runs the sheet a second time over it."""
    done = {}

    def first_run(path: Path):
        if path not in done:
            folder = tmp_path_factory.mktemp(path.stem)
            parameters = {"PLOTLY_RENDERER": batch.BATCH_PARAMETERS["PLOTLY_RENDERER"],
                          "RESULTS_DIR": str(folder / "runs")}
            (folder / "first").mkdir()
            done[path] = batch.execute(path, parameters, folder / "first"), folder / "first", parameters
        return done[path]

    return first_run


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory):
    """One real MLflow server for the session (its start takes about 15 s): tests/test_mlflow.py and
    test_mlflow_browser.py write to it, each under experiment names of its own."""
    pytest.importorskip("mlflow", reason="needs MLflow (pip install -e '.[mlflow]' or '.[dev]')")
    with server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture
def sleeping_child():
    """A real child process of the test process, asleep until the test ends (a job's worker, a data-loader worker)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()

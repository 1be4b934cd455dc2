"""Shared test setup: the `gpu` marker skips tests on machines without a CUDA GPU, with the reason; the cpu-smoke batch
that the batch and browser tests read is run once per session."""

import shutil
import subprocess
import sys

import pytest

from colloc_kit import batch


def _cuda_reason() -> str | None:
    try:
        import torch  # noqa: PLC0415 - a failing import is a skip reason here
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        return f"torch not importable: {exc}"
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("gpu"):  # not `"gpu" in item.keywords`: that matches the colloc_kit/gpu/ folder
            reason = reason or _cuda_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


@pytest.fixture
def has_mps_control() -> bool:
    return shutil.which("nvidia-cuda-mps-control") is not None


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """The whole cpu-smoke profile, run once for the session (a few minutes on a 2-core CPU)."""
    return batch.run_batch("cpu-smoke", out=tmp_path_factory.mktemp("batch"))


@pytest.fixture
def sleeping_child():
    """A real child process of the test process, asleep until the test ends (a job's worker, a data-loader worker)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()

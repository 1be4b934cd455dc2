"""The real MPS daemon on a GPU: clients connect, limits hold, a fault is seen, and nothing is ever left running.

    PYTHONPATH=$PWD python -m pytest tests/test_mps_gpu.py -v        # on the GPU machine
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from colloc_kit.gpu import nvml
from colloc_kit.gpu.mps_daemon import MpsDaemon
from colloc_kit.modes import make_mode
from colloc_kit.spec import ModeSpec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("nvidia-cuda-mps-control") is None,
                                                  reason="nvidia-cuda-mps-control is not on the PATH")]


def pgrep() -> str:
    return subprocess.run(["pgrep", "-a", "nvidia-cuda-mps"], capture_output=True, text=True).stdout.strip()


@pytest.fixture(autouse=True)
def nothing_left():
    assert pgrep() == "", "an MPS daemon was running before the test; stop it first"
    yield
    assert pgrep() == "", "MPS processes were left running"


@pytest.fixture
def gpu_uuid() -> str:
    with nvml.session() as lib:
        return nvml.text(lib.nvmlDeviceGetUUID(lib.nvmlDeviceGetHandleByIndex(0)))


def python(code: str, env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_real_daemon_serves_a_client_and_quits(tmp_path, gpu_uuid):
    code = ("import os, time, torch; torch.ones(1, device='cuda').sum().item(); "
            "print(os.getpid(), flush=True); time.sleep(3)")
    with MpsDaemon(gpu_uuid, tmp_path / "mps") as daemon:
        job = python(code, daemon.client_env())
        pid = int(job.stdout.readline())
        servers = daemon.servers()
        clients = daemon.clients(servers[0]) if servers else []
        assert job.wait(60) == 0, job.stderr.read()
    assert servers and pid in clients, (servers, clients, (tmp_path / "mps/log/control.log").read_text())
    assert daemon.notes == [] and daemon.fault is None
    assert (tmp_path / "mps/log/control.log").is_file()


def test_memory_limit_makes_an_oversized_allocation_fail(tmp_path):
    code = ("import torch; torch.empty(512 * 2**20, dtype=torch.uint8, device='cuda'); print('fits', flush=True); "
            "torch.empty(3 * 2**30, dtype=torch.uint8, device='cuda')")
    with make_mode(ModeSpec("mps", {"memory_limit_mb": 2048}), workdir=tmp_path, gpu=0, device="cuda") as mode:
        [slot] = mode.slots(1)
        job = python(code, slot.env)
        out, err = job.communicate(timeout=120)
    assert out.split() == ["fits"]  # (torch.cuda.mem_get_info still reported the whole card: seen on the H100)
    assert job.returncode != 0 and "out of memory" in err.lower(), err


def test_a_clients_device_assert_stays_with_that_client(tmp_path):
    """Seen on the H100 (driver 580): a device-side assert fails its own client; the server stays ACTIVE and a
    neighbouring client completes, so no server fault is reported."""
    bystander = ("import torch, time; x = torch.randn(2048, 2048, device='cuda'); t = time.time()\n"
                 "while time.time() - t < 20: (x @ x).sum().item()")
    faulty = ("import torch, time; time.sleep(3); "
              "torch.zeros(4, device='cuda')[torch.tensor([99], device='cuda')].sum().item()")  # device-side assert
    with make_mode(ModeSpec("mps"), workdir=tmp_path, gpu=0, device="cuda") as mode:
        slot = mode.slots(1)[0]
        jobs = [python(bystander, slot.env), python(faulty, slot.env)]
        codes = [j.wait(60) for j in jobs]
        problems = mode.problems()
    assert codes == [0, 1]
    assert problems == []


def start_mps_run(tmp_path) -> subprocess.Popen:
    """`colloc-kit run --mode mps` with two ResNet-18 jobs, returned once they train as clients of its daemon."""
    cmd = [sys.executable, "-m", "colloc_kit.cli", "run", "--mode", "mps", "--model", "resnet18", "--copies", "2",
           "--amp", "bf16", "--seconds", "300", "--out", str(tmp_path / "runs"), "--quiet"]
    run = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while "nvidia-cuda-mps-server" not in pgrep() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.5)
    time.sleep(5)  # jobs training as MPS clients
    assert "nvidia-cuda-mps-server" in pgrep() and run.poll() is None
    return run


def workers() -> str:
    return subprocess.run(["pgrep", "-af", "colloc_kit.worker"], capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("signal_whole_group", [False, True], ids=["notebook-interrupt", "terminal-ctrl-c"])
def test_interrupted_run_leaves_no_mps_process(tmp_path, signal_whole_group):
    """SIGINT mid-run, to the kit's process alone (a notebook's interrupt) or to its process group (Ctrl-C)."""
    run = start_mps_run(tmp_path)
    os.killpg(run.pid, signal.SIGINT) if signal_whole_group else run.send_signal(signal.SIGINT)
    output = run.communicate(timeout=120)[0]
    assert run.returncode == 130, output
    assert workers() == ""


def test_killed_kit_process_leaves_no_mps_process(tmp_path):
    """SIGKILL to the kit's process (a kernel killed mid-run): no `finally` runs, so the watchdog quits the daemon,
    and the workers end when their event pipe closes."""
    run = start_mps_run(tmp_path)
    run.kill()
    run.communicate(timeout=10)
    deadline = time.monotonic() + 60
    while (pgrep() or workers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert pgrep() == "" and workers() == "", (pgrep(), workers())

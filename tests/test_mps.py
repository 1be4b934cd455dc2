"""The MPS daemon and the `mps` mode, on the CPU, against tests/fake_mps_control.py and a stand-in NVML.

Every test ends by checking that no MPS process it started is left (the `no_leftovers` fixture).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import psutil
import pytest

from colloc_kit.errors import BadInput, GpuStateError
from colloc_kit.gpu import mps_daemon, mps_detect, nvml
from colloc_kit.gpu.mps_daemon import MpsDaemon
from colloc_kit.gpu.pids import alive, wait_gone
from colloc_kit.modes import make_mode
from colloc_kit.modes import mps as mps_mode
from colloc_kit.modes.mps import PARTITION_KIND
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec

FAKE = Path(__file__).with_name("fake_mps_control.py")
FAST = dict(start_timeout_s=3.0, command_timeout_s=1.0, quit_timeout_s=1.0, client_timeout_s=1.0)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A short folder of the test's own: a run's pipe folder inside it stays within MAX_PIPE_DIR_CHARS, as the tests
    expect, also under pytest-xdist, whose worker folders lengthen pytest's own tmp_path past it."""
    with tempfile.TemporaryDirectory(prefix="mps-") as folder:
        yield Path(folder)


@pytest.fixture
def control(tmp_path: Path) -> str:
    """An executable stand-in for nvidia-cuda-mps-control."""
    path = tmp_path / "bin" / "nvidia-cuda-mps-control"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.fixture(autouse=True)
def no_leftovers(tmp_path: Path):
    """Fail a test that leaves an MPS process (of a daemon under its tmp_path) running, and end those processes."""
    yield
    left = [d for d in mps_detect.detect_running_daemons(default_pipe_dir=None)
            if (d.pipe_dir or "").startswith(str(tmp_path))]
    for d in left:
        os.kill(d.pid, signal.SIGKILL)
    assert not left, f"MPS processes left running: {left}"


@pytest.fixture(autouse=True)
def only_this_tests_daemons(tmp_path: Path, monkeypatch):
    """The mode refuses this test's other daemons, not the MPS processes of a test run beside it on this machine."""
    blocking = mps_detect.blocking_daemons
    monkeypatch.setattr(mps_mode, "blocking_daemons", lambda **kw: [
        d for d in blocking(**kw) if (d.pipe_dir or "").startswith(str(tmp_path))])


class FakeNvml:
    """Just enough of pynvml for the mps mode: one GPU, its name, UUID, memory and compute mode."""

    NVML_COMPUTEMODE_DEFAULT, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 0, 3

    class NVMLError(Exception):
        pass

    def __init__(self, name: str = "NVIDIA H100 80GB HBM3", memory_mib: int = 81559):
        self.name, self.memory_mib, self.compute_mode, self.mig = name, memory_mib, 0, 0
        self.compute_mode_history: list[int] = []

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass

    def nvmlDeviceGetCount(self): return 1
    def nvmlDeviceGetMigMode(self, handle): return [self.mig, self.mig]

    def nvmlDeviceGetHandleByIndex(self, index):
        if index != 0:
            raise self.NVMLError("Invalid Argument")
        return "gpu0"

    def nvmlDeviceGetName(self, handle): return self.name
    def nvmlDeviceGetUUID(self, handle): return "GPU-0b1e2f3a-fake"
    def nvmlDeviceGetMemoryInfo(self, handle): return SimpleNamespace(total=self.memory_mib * 2**20)
    def nvmlDeviceGetComputeMode(self, handle): return self.compute_mode

    def nvmlDeviceSetComputeMode(self, handle, mode):
        self.compute_mode = mode
        self.compute_mode_history.append(mode)


@pytest.fixture
def card():
    fake = FakeNvml()
    with nvml.use_backend(fake):
        yield fake


def mode(tmp_path: Path, control: str, **options):
    return make_mode(ModeSpec("mps", {"control": control, **options}), workdir=tmp_path / "run", gpu=0, device="cuda")


def client(*code: str) -> subprocess.Popen:
    """A process standing for an MPS client (the fake daemon is told it connected)."""
    return subprocess.Popen([sys.executable, "-c", "; ".join(["import signal, time", *code, "time.sleep(60)"])])


def gone(*pids: int) -> bool:
    return not any(alive(p) for p in pids)


def eventually(condition, timeout_s: float = 5.0) -> bool:
    """Whether `condition()` becomes true within the time (the fake server names itself once Python has started)."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


# -- the daemon ----------------------------------------------------------------------------------------------------
def test_daemon_lifecycle_starts_answers_quits_and_keeps_logs(tmp_path, control):
    with MpsDaemon("GPU-abc", tmp_path / "mps", control, **FAST) as daemon:
        assert daemon.alive() and daemon.command("get_server_list") == ""
        for d in (daemon.pipe_dir, daemon.log_dir):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700
        assert daemon.client_env() == {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "mps" / "pipe"),
                                       "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "mps" / "log"),
                                       "CUDA_VISIBLE_DEVICES": "GPU-abc"}
        job = client()
        daemon.command(f"fake_connect {job.pid}")
        assert eventually(lambda: len(daemon.servers()) == 1)  # (CI under load: found only once it named itself)
        [server] = daemon.servers()
        assert daemon.clients(server) == [job.pid]
        job.kill(), job.wait()
        assert daemon.server_fault() is None
    assert gone(daemon.control_pid, server)
    assert not psutil.pid_exists(daemon.control_pid)  # reaped: no zombie for `pgrep nvidia-cuda-mps` to list
    assert daemon.notes == [] and daemon.fault is None
    assert "Exit" in (tmp_path / "mps" / "log" / "control.log").read_text()


def test_daemon_that_fails_to_start_is_reported(tmp_path, control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAIL_START", "1")
    with pytest.raises(GpuStateError, match="failed with status 1.*FAKE_MPS_FAIL_START"):
        MpsDaemon("0", tmp_path / "mps", control, **FAST).start()


def test_daemon_that_never_answers_is_refused_and_ended(tmp_path, control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_SILENT", "1")
    daemon = MpsDaemon("0", tmp_path / "mps", control, **{**FAST, "start_timeout_s": 1.5})
    with pytest.raises(GpuStateError, match="did not answer within 2 s"):
        daemon.start()
    assert daemon.control_pid and gone(daemon.control_pid)
    assert "were killed" in daemon.notes[0]


def test_daemon_that_hangs_on_quit_is_killed_with_its_server(tmp_path, control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_HANG_ON_QUIT", "1")  # and it ignores SIGTERM
    with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
        daemon.command("start_server -uid 0")
        [server] = daemon.servers()
    assert gone(daemon.control_pid, server)
    assert len(daemon.notes) == 1 and f"{daemon.control_pid}" in daemon.notes[0] and "killed" in daemon.notes[0]


def test_connected_client_is_terminated_and_a_hung_one_killed(tmp_path, control):
    obedient = client()
    hung = client("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
        for job in (obedient, hung):
            daemon.command(f"fake_connect {job.pid}")
    assert obedient.wait(5) == -signal.SIGTERM and hung.wait(5) == -signal.SIGKILL
    assert daemon.notes == [f"MPS clients {sorted([obedient.pid, hung.pid])} were still connected at shutdown and "
                            f"were ended with terminate_client; [{hung.pid}] did not exit and were killed"]
    assert gone(daemon.control_pid, *daemon.server_pids)


def test_server_fault_is_reported_from_status_and_log(tmp_path, control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAULT", "1")
    job = client()
    with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
        daemon.command(f"fake_connect {job.pid}")
        job.kill(), job.wait()
        fault = daemon.server_fault()
        assert "status: FAULT" in fault and "control.log" in fault and "fatal GPU exception" in fault
    assert daemon.fault == fault and daemon.server_fault() is not None  # still known from the log after the stop


@pytest.mark.parametrize("interrupt, why", [(KeyboardInterrupt(), "was interrupted"),
                                             (OSError(28, "No space left on device"), "failed (OSError")])
def test_ctrl_c_or_an_error_during_shutdown_kills_the_daemon_at_once(tmp_path, control, monkeypatch, interrupt, why):
    monkeypatch.setenv("FAKE_MPS_HANG_ON_QUIT", "1")
    daemon = MpsDaemon("0", tmp_path / "mps", control, **{**FAST, "quit_timeout_s": 60.0})
    daemon.start()
    daemon.command("start_server -uid 0")
    waits, real_wait_gone = [], wait_gone

    def interrupted_wait(pids, timeout_s):  # Ctrl-C or an error while waiting for the daemon to quit
        waits.append(timeout_s)
        if len(waits) == 1:
            raise interrupt
        return real_wait_gone(pids, timeout_s)

    monkeypatch.setattr(mps_daemon, "wait_gone", interrupted_wait)
    with pytest.raises(type(interrupt)):
        daemon.stop()
    assert waits[0] == 60.0 and gone(daemon.control_pid, *daemon.server_pids)
    assert f"killed because the shutdown {why}" in daemon.notes[0]


@pytest.mark.parametrize("interrupt", [RuntimeError("job runner failed"), KeyboardInterrupt()])
def test_daemon_is_shut_down_when_the_block_raises(tmp_path, control, interrupt):
    with pytest.raises(type(interrupt)):
        with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
            daemon.command("start_server -uid 0")
            raise interrupt
    assert gone(daemon.control_pid, *daemon.server_pids) and daemon.notes == []


def test_long_run_directory_puts_the_sockets_in_a_short_private_temp_dir(tmp_path, control):
    deep = tmp_path / ("d" * 60) / "run" / "mps"
    with MpsDaemon("0", deep, control, **FAST) as daemon:
        assert daemon.alive() and len(str(daemon.pipe_dir)) <= mps_daemon.MAX_PIPE_DIR_CHARS
        assert stat.S_IMODE(daemon.pipe_dir.stat().st_mode) == 0o700
        pipe_dir = daemon.pipe_dir
    assert not pipe_dir.exists() and (deep / "log" / "control.log").is_file()


def test_running_daemons_are_detected_and_refused_with_how_to_stop_them(tmp_path, control):
    with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
        daemon.command("start_server -uid 0")
        expected = {(daemon.control_pid, "control", str(daemon.pipe_dir)),
                    (daemon.servers()[0], "server", str(daemon.pipe_dir))}
        assert eventually(lambda: expected <= {(d.pid, d.kind, d.pipe_dir)
                                               for d in mps_detect.detect_running_daemons(default_pipe_dir=None)})
        with pytest.raises(GpuStateError) as refused:
            mps_detect.refuse_running_daemons(mps_mode.blocking_daemons(default_pipe_dir=tmp_path / "none"))
    text = str(refused.value)
    assert f"echo quit | CUDA_MPS_PIPE_DIRECTORY={daemon.pipe_dir} nvidia-cuda-mps-control" in text
    assert f"reuse_pipe_dir={daemon.pipe_dir}" in text


def test_daemon_in_the_default_pipe_dir_is_found_by_its_pid_file(tmp_path):
    default = tmp_path / "nvidia-mps"
    default.mkdir()
    (default / mps_detect.PID_FILE).write_text(f"{os.getpid()}\n")  # a live pid, whatever its name
    [found] = [d for d in mps_detect.detect_running_daemons(default_pipe_dir=default) if d.pid == os.getpid()]
    assert found.pipe_dir == str(default) and found.kind == "control"
    assert found in mps_detect.blocking_daemons(default_pipe_dir=default)


def test_a_root_daemon_whose_environment_is_unreadable_is_placed_by_the_default_pid_file(tmp_path, monkeypatch):
    class RootsDaemon:
        pid, info = os.getpid(), {"pid": os.getpid(), "name": "nvidia-cuda-mps-control", "cmdline": [],
                                  "username": "root", "status": psutil.STATUS_SLEEPING}

        def as_dict(self, attrs):
            return {key: self.info[key] for key in attrs}

        def environ(self):
            raise psutil.AccessDenied(os.getpid())

    monkeypatch.setattr(mps_detect.psutil, "process_iter", lambda attrs: [RootsDaemon()])
    default = tmp_path / "nvidia-mps"
    assert [d.pipe_dir for d in mps_detect.detect_running_daemons(default_pipe_dir=default)] == [None]
    default.mkdir()
    (default / mps_detect.PID_FILE).write_text(f"{os.getpid()}\n")
    assert [d.pipe_dir for d in mps_detect.detect_running_daemons(default_pipe_dir=default)] == [str(default)]


def test_reusing_a_running_daemon_neither_starts_nor_stops_it(tmp_path, control):
    with MpsDaemon("0", tmp_path / "own", control, **FAST) as owner:
        with MpsDaemon("0", tmp_path / "guest", control, reuse_pipe_dir=str(owner.pipe_dir), **FAST) as guest:
            assert guest.client_env()["CUDA_MPS_PIPE_DIRECTORY"] == str(owner.pipe_dir)
        assert owner.alive() and guest.notes == []
    with pytest.raises(GpuStateError, match="did not answer"):
        MpsDaemon("0", tmp_path / "guest", control, reuse_pipe_dir=str(tmp_path / "nothing"),
                  **{**FAST, "start_timeout_s": 0.5}).start()


def test_missing_control_program_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BadInput, match="nvidia-cuda-mps-control is not on the PATH"):
        mps_daemon.find_control()
    assert mps_detect.control_status()["control_binary"] is None


def test_control_status_reports_binary_and_running_daemons(tmp_path, control, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(control).parent}{os.pathsep}{os.environ['PATH']}")
    with MpsDaemon("0", tmp_path / "mps", control, **FAST) as daemon:
        status = mps_detect.control_status()
    assert status["control_binary"] == control
    assert {"pid": daemon.control_pid, "kind": "control", "user": status["daemons_running"][0]["user"],
            "pipe_dir": str(daemon.pipe_dir), "device": "0"} in status["daemons_running"]


# -- the mode: bad input is refused before anything starts --------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"thread_percentage": 0}, "thread_percentage must be a whole number 1-100"),
    ({"thread_percentage": 150}, "thread_percentage must be a whole number 1-100"),
    ({"thread_percentage": [50, "30"]}, "got '30'"),
    ({"memory_limit_mb": 0}, "memory_limit_mb must be a whole number >= 1"),
    ({"memory_limit_mb": []}, "empty list"),
    ({"partitions": "3g,2g"}, "partitions is a list"),
    ({"partitions": ["3g", "5g"]}, "MIG profile '5g' does not exist"),
    ({"partitions": ["3g"], "thread_percentage": 50}, "either partitions or thread_percentage"),
    ({"exclusive_process": "yes"}, "exclusive_process is true or false"),
    ({"exclusive_process": True}, "COLLOC_KIT_ALLOW_COMPUTE_MODE=1"),
    ({"threads": 50}, "unknown option.*threads.*valid options: thread_percentage"),
])
def test_bad_options_are_refused_when_the_spec_is_built(options, message):
    with pytest.raises(BadInput, match=message):
        ExperimentSpec(jobs=[JobSpec(model="resnet18")], modes=[ModeSpec("mps", options)])


def test_mps_on_the_cpu_is_refused():
    with pytest.raises(BadInput, match="needs a CUDA GPU"):
        ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu")], modes=[ModeSpec("mps")])


@pytest.mark.parametrize("options, n_jobs, message", [
    ({"memory_limit_mb": 81560}, 1, r"81560 is more than NVIDIA H100 80GB HBM3 has \(81559 MiB\)"),
    ({"memory_limit_mb": [1024, 90000]}, 2, "90000 is more than"),
    ({"thread_percentage": [50, 50]}, 3, "lists 2 values but the run has 3 jobs"),
    ({"partitions": ["4g", "4g"]}, 2, "need 8 compute and 8 memory slices.*has 7 and 8"),
    ({"partitions": ["3g", "2g", "1g", "1g"]}, 7, "give 4 slots but the run has 7 jobs"),
])
def test_limits_that_do_not_fit_the_card_are_refused_before_anything_starts(tmp_path, control, card, options,
                                                                             n_jobs, message):
    probe = mode(tmp_path, control, **options)
    with pytest.raises(BadInput, match=message):
        probe.check(n_jobs)
    assert not (tmp_path / "run").exists() and probe.daemon is None


def test_mode_refuses_a_gpu_that_does_not_exist_or_is_in_mig_mode(tmp_path, control, card):
    with pytest.raises(BadInput, match="GPU 3 does not exist.*this machine has 1 GPU"):
        make_mode(ModeSpec("mps", {"control": control}), workdir=tmp_path, gpu=3, device="cuda").check(1)
    card.mig = 1
    with pytest.raises(GpuStateError, match="is in MIG mode.*use mode mig with its mps option"):
        mode(tmp_path, control).check(1)


def test_mode_refuses_a_running_daemon_and_reuses_it_when_told(tmp_path, control, card):
    with MpsDaemon("0", tmp_path / "other", control, **FAST) as other:
        with pytest.raises(GpuStateError, match="already running"):
            mode(tmp_path, control).check(2)
        with pytest.raises(GpuStateError, match="already running"):
            mode(tmp_path, control).__enter__()
        assert not (tmp_path / "run").exists()
        with mode(tmp_path, control, reuse_pipe_dir=str(other.pipe_dir)) as reusing:
            assert reusing.slots(1)[0].env["CUDA_MPS_PIPE_DIRECTORY"] == str(other.pipe_dir)
        assert other.alive()


# -- the mode: lifecycle, slots, records --------------------------------------------------------------------------
def test_mode_hands_out_slots_with_limits_and_leaves_nothing(tmp_path, control, card):
    with mode(tmp_path, control, thread_percentage=[50, 30, 20], memory_limit_mb=2048) as m:
        slots = m.slots(3)
        daemon = m.daemon
        assert daemon.alive() and m.problems() == []
    pipe = str(tmp_path / "run" / "mps" / "pipe")
    assert slots[1].env == {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "run/mps/log"),
                            "CUDA_VISIBLE_DEVICES": "GPU-0b1e2f3a-fake", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
                            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2048M"}
    assert [s.info for s in slots] == [{"thread_percentage": t, "memory_limit_mb": 2048, "partition": None}
                                       for t in (50, 30, 20)]
    assert gone(daemon.control_pid) and m.state()["daemon"]["pipe_dir"] == pipe and m.state()["kind"] == "MPS"
    assert card.compute_mode_history == []  # never touched by default


def test_mode_without_limits_sets_no_limit_variables(tmp_path, control, card):
    with mode(tmp_path, control) as m:
        [slot] = m.slots(1)
    assert not {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"} & slot.env.keys()


def test_partitions_become_mig_shaped_limits_labelled_not_mig(tmp_path, control, card):
    with mode(tmp_path, control, partitions=["3g", "2g.20gb", "1g", "1g"]) as m:
        slots = m.slots(4)
        state = m.state()
    assert [s.info["thread_percentage"] for s in slots] == [42, 28, 14, 14]
    assert [s.info["memory_limit_mb"] for s in slots] == [40779, 20389, 10194, 10194]  # 81559 MiB x 4/8, 2/8, 1/8
    assert slots[0].info["partition"] == "3g.40gb (MPS partition, not MIG)"
    assert all(PARTITION_KIND in s.label for s in slots) and state["kind"] == PARTITION_KIND
    assert slots[3].env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10194M"


def test_partitions_on_a_gpu_without_mig_use_the_generic_shape(tmp_path, control):
    with nvml.use_backend(FakeNvml(name="Tesla V100-SXM2-32GB", memory_mib=32510)):
        with mode(tmp_path, control, partitions=["1g"] * 7) as m:
            slots = m.slots(2)
            state = m.state()
    assert [(s.info["thread_percentage"], s.info["memory_limit_mb"]) for s in slots] == [(14, 4063)] * 2
    assert "as on H100-80GB, scaled to Tesla V100-SXM2-32GB" in state["partition_slices"]


def test_server_fault_becomes_a_problem_of_the_run(tmp_path, control, card, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAULT", "1")
    job = client()
    with mode(tmp_path, control) as m:
        m.daemon.command(f"fake_connect {job.pid}")
        job.kill(), job.wait()
        [problem] = m.problems()
    assert problem.startswith("MPS server fault") and "FAULT" in problem


def test_daemon_dying_mid_run_becomes_a_problem(tmp_path, control, card):
    with mode(tmp_path, control) as m:
        os.kill(m.daemon.control_pid, signal.SIGKILL)
        assert wait_gone([m.daemon.control_pid], 5) == []
        assert any("exited during the run" in p for p in m.problems())


@pytest.mark.parametrize("interrupt", [RuntimeError("launcher failed"), KeyboardInterrupt()])
def test_mode_restores_everything_when_the_block_raises(tmp_path, control, card, monkeypatch, interrupt):
    monkeypatch.setenv("COLLOC_KIT_ALLOW_COMPUTE_MODE", "1")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    m = mode(tmp_path, control, exclusive_process=True)
    with pytest.raises(type(interrupt)):
        with m:
            assert card.compute_mode == FakeNvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
            m.slots(2)
            raise interrupt
    assert gone(m.daemon.control_pid) and card.compute_mode_history == [3, 0]


def test_compute_mode_is_restored_when_the_daemon_fails_to_start(tmp_path, control, card, monkeypatch):
    monkeypatch.setenv("COLLOC_KIT_ALLOW_COMPUTE_MODE", "1")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("FAKE_MPS_FAIL_START", "1")
    with pytest.raises(GpuStateError):
        with mode(tmp_path, control, exclusive_process=True):
            pass
    assert card.compute_mode_history == [3, 0]


def test_daemon_is_quit_when_the_process_that_started_it_is_killed(tmp_path, control):
    """A kernel restarted or killed mid-run cannot run its `finally`: the watchdog quits the daemon instead."""
    owner = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from colloc_kit.gpu.mps_daemon import MpsDaemon\n"
        f"d = MpsDaemon('GPU-x', Path({str(tmp_path / 'mps')!r}), {control!r}, start_timeout_s=5)\n"
        "d.start(); print(d.control_pid, flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    control_pid = int(owner.stdout.readline())
    assert not gone(control_pid)
    owner.kill()
    owner.wait()
    assert eventually(lambda: gone(control_pid), timeout_s=10), "the daemon outlived the process that started it"
    assert "quit" in (tmp_path / "mps" / "log" / "control.log").read_text()


def test_daemon_is_quit_when_the_process_that_started_it_is_killed_while_it_shuts_it_down(tmp_path, control):
    """A kit killed while it waits for `quit` (a time limit's SIGKILL after its SIGTERM; a lent H200 in session 24):
    the watchdog is still there and ends the daemon, which here neither quits nor obeys SIGTERM."""
    owner = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from colloc_kit.gpu.mps_daemon import MpsDaemon\n"
        f"d = MpsDaemon('GPU-x', Path({str(tmp_path / 'mps')!r}), {control!r}, start_timeout_s=5, quit_timeout_s=3)\n"
        "d.start(); print(d.control_pid, flush=True); print('stopping', flush=True); d.stop()")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "FAKE_MPS_HANG_ON_QUIT": "1"})
    control_pid = int(owner.stdout.readline())
    assert owner.stdout.readline() == "stopping\n"
    time.sleep(1.0)  # inside stop(): `quit` sent, waiting up to 3 s for the daemon to go
    owner.kill()
    owner.wait()
    assert eventually(lambda: gone(control_pid), timeout_s=20), "the daemon outlived a kit killed in its shutdown"


@pytest.mark.parametrize("name", ["naive", "exclusive"])
def test_plain_modes_refuse_a_daemon_in_the_default_pipe_dir_their_jobs_would_join(tmp_path, monkeypatch, name):
    default = tmp_path / "nvidia-mps"
    monkeypatch.setattr(mps_detect, "DEFAULT_PIPE_DIR", default)
    plain = make_mode(ModeSpec(name), workdir=tmp_path, gpu=0, device="cuda")
    plain.check(2)  # no daemon yet
    default.mkdir()
    (default / mps_detect.PID_FILE).write_text(f"{os.getpid()}\n")  # a live pid, as the daemon writes it
    with pytest.raises(GpuStateError, match=f"would measure MPS, not {name}") as refused:
        plain.check(2)
    assert f"echo quit | CUDA_MPS_PIPE_DIRECTORY={default} nvidia-cuda-mps-control" in str(refused.value)
    assert "reuse_pipe_dir" not in str(refused.value)
    with pytest.raises(GpuStateError):
        plain.__enter__()
    make_mode(ModeSpec(name), workdir=tmp_path, gpu=0, device="cpu").check(2)  # CPU jobs never meet MPS


def test_stopping_one_of_two_daemons_does_not_wait_for_the_other(tmp_path, control):
    """MIG with MPS runs a daemon per instance; each stops on its own, promptly, and leaves no zombie."""
    with MpsDaemon("0", tmp_path / "a", control, **FAST) as first:
        second = MpsDaemon("0", tmp_path / "b", control, **FAST)
        second.start()
        started = time.monotonic()
        second.stop()
        assert time.monotonic() - started < 1.5 and first.alive()
    assert not psutil.pid_exists(second.control_pid) and not psutil.pid_exists(first.control_pid)


def test_a_daemon_pinned_to_another_gpu_does_not_block_a_cell_on_this_one(tmp_path, control, card):
    """Cells on several GPUs each run a private daemon: GPU 1's daemon (by UUID) leaves GPU 0's mode free to start."""
    with MpsDaemon("GPU-another-card", tmp_path / "other", control, **FAST) as other:
        with mode(tmp_path, control) as m:
            assert m.daemon.pipe_dir != other.pipe_dir
            assert m.slots(1)[0].env["CUDA_VISIBLE_DEVICES"] == "GPU-0b1e2f3a-fake"
        assert other.alive()
    with MpsDaemon("GPU-0b1e2f3a-fake", tmp_path / "same", control, **FAST):
        with pytest.raises(GpuStateError, match="already running"):
            mode(tmp_path, control).check(1)


def test_the_checks_before_a_run_scan_the_machine_once_and_still_refuse_a_running_daemon(tmp_path, control, card,
                                                                                         monkeypatch):
    """`preflight` checks every mode on every GPU on one scan of the machine's processes (a scan each made the seed
    study's checks take seconds on a host of hundreds of processes), and that one scan still finds a running daemon."""
    from colloc_kit.pipeline.cell import preflight  # noqa: PLC0415 - this test only

    scans = []
    scan = mps_detect._scan
    monkeypatch.setattr(mps_detect, "_scan", lambda pipe_dir: scans.append(pipe_dir) or scan(pipe_dir))
    spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cuda")], copies=[1, 2], modes=[
        ModeSpec("naive"), ModeSpec("mps", {"control": control}),
        ModeSpec("mps", {"control": control, "partitions": ["3g", "3g"]})])
    preflight(spec, gpus=[0], modes=True)
    assert len(scans) == 1 and mps_detect._SCANS == [], "one scan, dropped at the block's end"
    with MpsDaemon("0", tmp_path / "other", control, **FAST):
        with pytest.raises(GpuStateError, match="already running"):
            preflight(spec, gpus=[0], modes=True)
    assert len(scans) >= 2

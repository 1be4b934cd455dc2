"""The `mig` mode on the simulated NVML: apply, slots, and the exact previous state back on every exit path."""

import ctypes
import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from colloc_kit.errors import BadInput, GpuStateError
from colloc_kit.gpu import mig_apply, nvml
from colloc_kit.gpu.mig_simulator import simulated_gpu
from colloc_kit.modes import make_mode, validate_mode_spec
from colloc_kit.modes import mig as mig_mode
from colloc_kit.spec import ModeSpec


@contextmanager
def gpu(model="H100-80GB", **knobs):
    with nvml.use_backend(simulated_gpu(model, **knobs)) as sim:
        yield sim


def mode(tmp_path, layout, **options):
    return make_mode(ModeSpec("mig", {"layout": layout, **options}), workdir=tmp_path, gpu=0, device="cuda")


def uuid_profile(sim, uuid):
    with nvml.session():
        return sim.nvmlDeviceGetName(sim.nvmlDeviceGetHandleByUUID(uuid))


def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@pytest.mark.parametrize("model", ["A100-40GB", "H100-80GB"])
@pytest.mark.parametrize("layout", ["7x1g", "3x2g", "2x3g", "4g", "7g", "4g,2g,1g", "3x2g,1g"])
def test_apply_then_restore_leaves_the_state_found(tmp_path, model, layout):
    with gpu(model) as sim:
        before = sim.snapshot()
        with mode(tmp_path, layout) as m:
            during = sim.snapshot()
            slots = m.slots(len(m.mig.plan.instances))
        assert sim.snapshot() == before
    assert during["mode"] == 1
    assert sorted((name, start) for name, start, _ in during["instances"]) == \
        sorted((i.profile.name, i.start) for i in m.mig.plan.instances)
    assert len({s.env["CUDA_VISIBLE_DEVICES"] for s in slots}) == len(slots)


def test_slots_select_the_planned_instances(tmp_path):
    with gpu() as sim, mode(tmp_path, "3g.40gb,2g.20gb,1g.10gb,1g.10gb") as m:
        slots = m.slots(4)
        assert [s.info["profile"] for s in slots] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
        assert [s.info["placement"] for s in slots] == ["4:4", "0:2", "2:1", "3:1"]
        for slot in slots:
            profile = uuid_profile(sim, slot.env["CUDA_VISIBLE_DEVICES"])
            assert profile.endswith(f"MIG {slot.info['profile']} (simulated)")
        state = m.state()
        assert [i["uuid"] for i in state["instances"]] == [s.env["CUDA_VISIBLE_DEVICES"] for s in slots]
        assert state["found"]["mig_mode"] == "disabled"


@pytest.mark.parametrize("error", [RuntimeError("job crashed"), KeyboardInterrupt()])
def test_exception_or_interrupt_inside_restores(tmp_path, error):
    with gpu() as sim:
        before = sim.snapshot()
        with pytest.raises(type(error)):
            with mode(tmp_path, "4g,2g,1g"):
                raise error
        assert sim.snapshot() == before


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_creation_failing_half_way_rolls_back(tmp_path, k):
    with gpu() as sim:
        before = sim.snapshot()
        sim.fail_creation(k, sim.NVML_ERROR_UNKNOWN)  # creations: GI, CI, GI, CI, ... (8 for 4 instances)
        with pytest.raises(sim.NVMLError_Unknown):
            with mode(tmp_path, "3g,2g,1g,1g"):
                pytest.fail("the block must not run")
        assert sim.snapshot() == before
        assert sim.calls[-1] == "nvmlDeviceSetMigMode(0)"


def test_interrupt_during_creation_rolls_back(tmp_path):
    with gpu() as sim:
        before = sim.snapshot()
        real = sim.nvmlGpuInstanceCreateComputeInstance
        calls = []

        def interrupted(*args):
            calls.append(args)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real(*args)

        sim.nvmlGpuInstanceCreateComputeInstance = interrupted
        with pytest.raises(KeyboardInterrupt):
            with mode(tmp_path, "3x2g"):
                pass
        assert sim.snapshot() == before


def test_killed_worker_on_an_instance_does_not_stop_the_restore(tmp_path):
    with gpu() as sim:
        before = sim.snapshot()
        worker = sleeper()
        try:
            with mode(tmp_path, "2x3g") as m:
                sim.add_process(worker.pid, m.slots(2)[0].env["CUDA_VISIBLE_DEVICES"])
                os.kill(worker.pid, signal.SIGKILL)
                worker.wait()
        finally:
            worker.kill()
        assert sim.snapshot() == before


def test_worker_still_running_is_reported_not_hidden(tmp_path, monkeypatch):
    monkeypatch.setattr(mig_apply, "IN_USE_RETRY_S", 0.3)
    with gpu() as sim:
        worker = sleeper()
        try:
            with pytest.raises(GpuStateError, match=r"could not destroy compute instance .*In use"):
                with mode(tmp_path, "2x3g") as m:
                    sim.add_process(worker.pid, m.slots(2)[0].env["CUDA_VISIBLE_DEVICES"])
            assert sim.snapshot()["mode"] == 1  # the instance with the process is still there, as said
        finally:
            worker.kill()
            worker.wait()


def test_gpu_that_needs_a_reset_is_left_as_found(tmp_path):
    with gpu(needs_reset=True) as sim:
        with pytest.raises(GpuStateError, match="needs a GPU reset to enable MIG.*never resets"):
            with mode(tmp_path, "7g"):
                pass
        assert sim.snapshot() == {"mode": 0, "pending": 0, "instances": []}
        assert sim.calls == ["nvmlDeviceSetMigMode(1)", "nvmlDeviceSetMigMode(0)"]


def test_after_the_administrator_s_reset_mig_stays_enabled_as_found(tmp_path):
    with gpu(needs_reset=True) as sim:
        with nvml.session():
            sim.nvmlDeviceSetMigMode(sim.nvmlDeviceGetHandleByIndex(0), 1)  # `nvidia-smi -mig 1`: pending
        sim.reset_gpu()  # the administrator's reset
        before = sim.snapshot()
        with mode(tmp_path, "7x1g"):
            pass
        assert sim.snapshot() == before == {"mode": 1, "pending": 1, "instances": []}
        assert "nvmlDeviceSetMigMode(0)" not in sim.calls


def test_pending_mode_found_is_refused_before_any_change(tmp_path):
    with gpu(needs_reset=True) as sim:
        with nvml.session():
            sim.nvmlDeviceSetMigMode(sim.nvmlDeviceGetHandleByIndex(0), 1)
        sim.calls.clear()
        with pytest.raises(GpuStateError, match="pending"):
            mode(tmp_path, "7g").__enter__()
        assert sim.calls == []


def test_refusals_before_anything_changes(tmp_path):
    with gpu(privileged=False) as sim:
        with pytest.raises(BadInput, match="root or read access to /proc/driver/nvidia/capabilities/mig/config"):
            mode(tmp_path, "7g").__enter__()
        assert sim.calls == []
    with gpu() as sim:
        sim.add_process(os.getpid())
        with pytest.raises(GpuStateError, match=rf"processes \[{os.getpid()}\] use GPU 0"):
            mode(tmp_path, "7g").__enter__()
        assert sim.calls == []
    with gpu(mig_capable=False) as sim:
        with pytest.raises(BadInput, match="does not support MIG"):
            mode(tmp_path, "7g").check(1)
    with gpu() as sim:
        with pytest.raises(BadInput, match="needs 8 compute slices"):
            mode(tmp_path, "4g,4g").__enter__()
        assert sim.calls == []


def existing(sim, *placements):
    """Put instances on the simulated GPU as another user would have (MIG enabled)."""
    with nvml.session():
        h = sim.nvmlDeviceGetHandleByIndex(0)
        sim.nvmlDeviceSetMigMode(h, 1)
        for profile_id, start, size in placements:
            where = sim.c_nvmlGpuInstancePlacement_t(start, size)
            gi = sim.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, ctypes.byref(where))
            sim.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    sim.calls.clear()


def test_existing_instances_stay_when_the_layout_fits_beside_them(tmp_path):
    with gpu() as sim:
        existing(sim, (19, 6, 1))  # a 1g.10gb at slice 6
        before = sim.snapshot()
        with mode(tmp_path, "4g,2g") as m:
            assert len(sim.snapshot()["instances"]) == 3
            assert m.state()["destroyed_and_recreated"] == []
        assert sim.snapshot() == before


def test_existing_instances_in_the_way_are_destroyed_only_when_allowed(tmp_path):
    with gpu() as sim:
        existing(sim, (19, 0, 1), (19, 4, 1))
        before = sim.snapshot()
        with pytest.raises(BadInput, match="already has MIG instances 1g.10gb@0 .*allow_destroy"):
            mode(tmp_path, "4g,3g").__enter__()
        assert sim.calls == []
        with mode(tmp_path, "4g,3g", allow_destroy=True) as m:
            assert [n for n, _, _ in sim.snapshot()["instances"]] == ["3g.40gb", "4g.40gb"]
            assert m.state()["destroyed_and_recreated"] == ["1g.10gb@0", "1g.10gb@4"]
        assert sim.snapshot() == before


def test_dry_run_prints_commands_and_changes_nothing(tmp_path, capsys):
    with gpu("A100-40GB") as sim:
        with mode(tmp_path, "4g,2g,1g", dry_run=True) as m:
            with pytest.raises(BadInput, match="dry run"):
                m.slots(3)
        assert sim.calls == []
    out = capsys.readouterr().out
    assert "nvidia-smi -i 0 -mig 1" in out
    assert "nvidia-smi mig -i 0 -cgi 5:0,14:4,19:6 -C" in out
    assert "# on exit: nvidia-smi -i 0 -mig 0" in out


def test_check_and_options(tmp_path, monkeypatch):
    monkeypatch.setattr(mig_mode, "find_control", lambda: "nvidia-cuda-mps-control")
    with gpu():
        mode(tmp_path, "3x2g").check(3)
        with pytest.raises(BadInput, match="3 instances for 4 jobs"):
            mode(tmp_path, "3x2g").check(4)
        mode(tmp_path, "3x2g", mps=True).check(6)
    for options, message in [({}, "needs a layout"), ({"layout": "5g"}, "no MIG GPU has"),
                             ({"layout": "7g", "mps": "yes"}, "mps is true or false"),
                             ({"layout": "7g", "colour": 1}, "unknown option")]:
        with pytest.raises(BadInput, match=message):
            validate_mode_spec(ModeSpec("mig", options), "cuda")
    with pytest.raises(BadInput, match="MIG-capable CUDA GPU"):
        validate_mode_spec(ModeSpec("mig", {"layout": "7g"}), "cpu")


class FakeDaemon:
    """Stands in for MpsDaemon (no MPS binary here): records its life next to the simulator's calls."""

    log: list = []

    def __init__(self, device, directory):
        self.device = device

    def __enter__(self):
        FakeDaemon.log.append(("start", self.device))
        return self

    def __exit__(self, *exc):
        FakeDaemon.log.append(("stop", self.device, self.sim.snapshot()["mode"]))

    def client_env(self):
        return {"CUDA_VISIBLE_DEVICES": self.device, "CUDA_MPS_PIPE_DIRECTORY": f"/pipes/{self.device}"}

    def server_fault(self):
        return None

    def state(self):
        return {"device": self.device}


def test_mps_on_mig_one_daemon_per_instance_stopped_before_restore(tmp_path, monkeypatch):
    monkeypatch.setattr(mig_mode, "MpsDaemon", FakeDaemon)
    monkeypatch.setattr(mig_mode, "find_control", lambda: "nvidia-cuda-mps-control")
    FakeDaemon.log = []
    with gpu() as sim:
        FakeDaemon.sim = sim
        with mode(tmp_path, "2x3g", mps=True) as m:
            slots = m.slots(4)
            uuids = [c["uuid"] for c in m.state()["instances"]]
        assert sim.snapshot()["mode"] == 0
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == [uuids[0], uuids[1], uuids[0], uuids[1]]
    assert all(s.env["CUDA_MPS_PIPE_DIRECTORY"].startswith("/pipes/MIG-") and s.info["mps"] for s in slots)
    assert [e[0] for e in FakeDaemon.log] == ["start", "start", "stop", "stop"]
    assert all(e[2] == 1 for e in FakeDaemon.log if e[0] == "stop")  # daemons quit while MIG still stood


def test_mps_on_mig_without_the_mps_program_is_refused_before_mig_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-cuda-mps-control here
    with gpu() as sim:
        with pytest.raises(BadInput, match="nvidia-cuda-mps-control is not on the PATH"):
            mode(tmp_path, "2x3g", mps=True).check(4)
        with pytest.raises(BadInput, match="nvidia-cuda-mps-control is not on the PATH"):
            mode(tmp_path, "2x3g", mps=True).__enter__()
        assert sim.snapshot()["mode"] == 0

"""The simulated MIG hardware on its own (colloc_kit/gpu/mig_state.py), without the NVML facade: placement, capacity,
modes, privilege and processes, and the NVML error code each refusal gives. Processes here are real ones."""

import os

import pytest
from pynvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_ERROR_UNKNOWN,
    NVML_SUCCESS,
    NVMLError,
)

from colloc_kit.gpu.mig_catalogue import GpuModel, Profile
from colloc_kit.gpu.mig_state import SimulatedHost

# GPU-instance profile ids (A100/H100 tables) and compute-instance profiles used below
P1G, P1G_ME, P2G, P3G, P4G, P7G = 19, 20, 14, 9, 5, 0
CI_1SLICE, CI_2SLICE, CI_3SLICE = 0, 1, 2


def refused(code, action, *args, **kwargs):
    """Run `action` and check that it raises pynvml's NVMLError with `code`."""
    with pytest.raises(NVMLError) as caught:
        action(*args, **kwargs)
    assert caught.value.value == code, f"expected NVML error {code}, got {caught.value.value} ({caught.value})"


def mig_gpu(model="A100-40GB", **knobs):
    gpu = SimulatedHost(model, **knobs).gpus[0]
    assert gpu.set_mig_mode(True) == NVML_SUCCESS
    return gpu


def test_a_gpu_instance_starts_only_where_its_profile_allows_and_covers_its_memory_slices():
    gpu = mig_gpu()
    refused(NVML_ERROR_INVALID_ARGUMENT, gpu.create_gpu_instance, P3G, start=2)  # 3g starts at 0 or 4
    refused(NVML_ERROR_INVALID_ARGUMENT, gpu.create_gpu_instance, P3G, start=4, size=2)  # a 3g covers 4 slices
    gi = gpu.create_gpu_instance(P3G, start=4, size=4)
    assert (gi.profile.name, gi.memory_range) == ("3g.20gb", range(4, 8))
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, gpu.create_gpu_instance, P2G, start=4)  # its memory slices are taken
    assert gpu.create_gpu_instance(P2G, start=2).memory_range == range(2, 4)


def test_the_first_placement_that_fits_is_taken_and_capacity_counts_the_placements_left():
    gpu = mig_gpu()
    gpu.create_gpu_instance(P4G, start=0)
    gpu.create_gpu_instance(P2G, start=4)
    assert gpu.remaining_capacity(P2G) == 0 and gpu.remaining_capacity(P1G) == 1
    assert gpu.create_gpu_instance(P1G).start == 6
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, gpu.create_gpu_instance, P1G)


def test_compute_slices_can_run_out_before_memory_slices():
    one = Profile("1c.1m", 1, 1, 1024, 10, 4, 0, P1G, (0, 1, 2, 3))  # a made-up GPU: 2 compute, 4 memory slices
    gpu = SimulatedHost(GpuModel("toy", 2, 4, 20, 4096, (one,)), mig_enabled=True).gpus[0]
    gpu.create_gpu_instance(P1G, start=0)
    gpu.create_gpu_instance(P1G, start=1)
    assert gpu.fits(one, 2) is False and gpu.remaining_capacity(P1G) == 0
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, gpu.create_gpu_instance, P1G, start=2)  # memory slice 2 is free


def test_a_profile_s_instance_limit_holds():
    gpu = mig_gpu("H100-80GB")
    gpu.create_gpu_instance(P1G_ME, start=0)  # one +me instance per GPU
    assert gpu.remaining_capacity(P1G_ME) == 0
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, gpu.create_gpu_instance, P1G_ME, start=1)
    assert gpu.remaining_capacity(P1G) == 6


def test_gpu_instance_ids_are_a100_s():
    gpu = mig_gpu()
    assert gpu.create_gpu_instance(P7G).id == 0
    gpu.gpu_instance(0).destroy()
    ids = [gpu.create_gpu_instance(p, start=s).id for p, s in [(P3G, 4), (P2G, 0), (P1G, 2), (P1G, 3)]]
    assert ids == [2, 3, 9, 10]
    assert [gi.id for gi in gpu.gpu_instances_of(P1G)] == [9, 10]
    refused(NVML_ERROR_NOT_FOUND, gpu.gpu_instance, 1)


def test_instances_exist_only_with_mig_enabled_and_on_a_mig_gpu():
    gpu = SimulatedHost("A100-40GB").gpus[0]
    refused(NVML_ERROR_NOT_SUPPORTED, gpu.create_gpu_instance, P1G)
    refused(NVML_ERROR_NOT_SUPPORTED, gpu.mig_devices)
    plain = SimulatedHost("A100-40GB", mig_capable=False).gpus[0]
    refused(NVML_ERROR_NOT_SUPPORTED, plain.set_mig_mode, True)
    refused(NVML_ERROR_NOT_SUPPORTED, plain.profile_by_id, P1G)
    refused(NVML_ERROR_INVALID_ARGUMENT, gpu.profile_by_id, 99)
    refused(NVML_ERROR_INVALID_ARGUMENT, gpu.profile_by_enum, 99)


def test_enabling_mig_waits_for_a_reset_where_the_host_needs_one():
    host = SimulatedHost("H100-80GB", needs_reset=True)
    gpu = host.gpus[0]
    assert gpu.set_mig_mode(True) == NVML_ERROR_RESET_REQUIRED
    assert (gpu.mig_enabled, gpu.mig_pending) == (False, True)
    gpu.reset()
    assert gpu.snapshot() == {"mode": 1, "pending": 1, "instances": []}


def test_a_running_process_keeps_the_mode_pending_until_it_exits(sleeping_child):
    gpu = SimulatedHost("H100-80GB").gpus[0]
    gpu.add_process(sleeping_child.pid)
    assert gpu.set_mig_mode(True) == NVML_ERROR_IN_USE and not gpu.mig_enabled and gpu.mig_pending
    refused(NVML_ERROR_IN_USE, gpu.reset)
    sleeping_child.kill()
    sleeping_child.wait()
    assert gpu.running() == []  # an exited process leaves the GPU
    gpu.reset()
    assert gpu.mig_enabled


def test_disabling_mig_needs_every_instance_gone():
    gpu = mig_gpu()
    gi = gpu.create_gpu_instance(P7G)
    refused(NVML_ERROR_IN_USE, gpu.set_mig_mode, False)
    gi.destroy()
    assert gpu.set_mig_mode(False) == NVML_SUCCESS and not gpu.mig_enabled


def test_changes_need_privilege_and_reads_do_not():
    host = SimulatedHost("A100-40GB")
    gpu = host.gpus[0]
    gpu.set_mig_mode(True)
    gi = gpu.create_gpu_instance(P3G, start=0)
    ci = gi.create_compute_instance(CI_3SLICE)
    host.privileged = False
    refused(NVML_ERROR_NO_PERMISSION, gpu.create_gpu_instance, P3G, start=4)
    refused(NVML_ERROR_NO_PERMISSION, ci.destroy)
    refused(NVML_ERROR_NO_PERMISSION, gpu.set_mig_mode, False)
    assert gpu.remaining_capacity(P3G) == 1 and gpu.mig_devices() == [ci]
    host.privileged = True
    ci.destroy()
    gi.destroy()
    assert gpu.snapshot()["instances"] == []


def test_compute_instances_divide_their_gpu_instance():
    gpu = mig_gpu("H100-80GB")
    three, four = gpu.create_gpu_instance(P3G, start=4), gpu.create_gpu_instance(P4G, start=0)
    refused(NVML_ERROR_NOT_SUPPORTED, three.compute_slices_of, CI_2SLICE)  # 2 does not divide 3
    assert four.compute_slices_of(CI_2SLICE) == 2
    refused(NVML_ERROR_INVALID_ARGUMENT, four.create_compute_instance, CI_2SLICE, start=1)  # misaligned
    refused(NVML_ERROR_INVALID_ARGUMENT, four.create_compute_instance, CI_2SLICE, start=4)  # past the end
    first = four.create_compute_instance(CI_2SLICE, start=2, size=2)
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, four.create_compute_instance, CI_1SLICE, start=3)
    second = four.create_compute_instance(CI_2SLICE)  # the first free aligned start
    assert [(ci.id, ci.start, ci.size) for ci in (first, second)] == [(0, 2, 2), (1, 0, 2)]
    refused(NVML_ERROR_INSUFFICIENT_RESOURCES, four.create_compute_instance, CI_1SLICE)
    assert four.compute_instances_of(CI_2SLICE) == [first, second] and four.compute_instances_of(CI_1SLICE) == []
    refused(NVML_ERROR_IN_USE, four.destroy)
    refused(NVML_ERROR_NOT_FOUND, four.compute_instance, 2)


def test_mig_devices_have_simulated_uuids_names_and_memory(sleeping_child):
    host = SimulatedHost("A100-40GB", gpus=2, mig_enabled=True)
    gpu = host.gpus[1]
    late = gpu.create_gpu_instance(P1G, start=6).create_compute_instance(CI_1SLICE)
    early = gpu.create_gpu_instance(P3G, start=0).create_compute_instance(CI_3SLICE)
    assert gpu.mig_devices() == [early, late]  # by GPU-instance id: 1 (3g at 0), 13 (1g at 6)
    assert late.uuid.startswith("MIG-simulated-") and len(late.uuid) == len(host.gpus[0].uuid) == 50
    assert gpu.uuid != host.gpus[0].uuid == SimulatedHost("A100-40GB").gpus[0].uuid  # stable, one per GPU
    assert host.find(late.uuid) is late and host.find(gpu.uuid) is gpu and host.find("MIG-none") is None
    assert gpu.device_name(late) == "NVIDIA A100-SXM4-40GB MIG 1g.5gb (simulated)"
    gpu.add_process(sleeping_child.pid, late.uuid, used_mib=100)
    gpu.add_process(os.getpid(), used_mib=7)
    assert gpu.memory_bytes(late) == (4864 * 2**20, 100 * 2**20)
    assert gpu.memory_bytes() == (40960 * 2**20, 107 * 2**20)
    refused(NVML_ERROR_IN_USE, late.destroy)
    gpu.remove_process(sleeping_child.pid)
    late.destroy()
    assert not late.exists and early.exists


def test_a_reset_or_destroy_leaves_stale_objects():
    gpu = mig_gpu()
    gi = gpu.create_gpu_instance(P7G)
    ci = gi.create_compute_instance(CI_1SLICE)
    assert gi.exists and ci.exists
    gpu.reset()
    assert not gi.exists and not ci.exists and gpu.mig_devices() == []
    again = gpu.create_gpu_instance(P7G)
    assert again.id == gi.id and again.exists and not gi.exists  # the same id, a new instance


def test_injected_failures_count_gpu_and_compute_instance_creations():
    host = SimulatedHost("A100-40GB", mig_enabled=True)
    gpu = host.gpus[0]
    host.fail_creation(2, NVML_ERROR_UNKNOWN)
    gi = gpu.create_gpu_instance(P3G, start=0)  # creation 1
    refused(NVML_ERROR_UNKNOWN, gi.create_compute_instance, CI_3SLICE)  # creation 2 fails, nothing made
    assert gi.compute_instances == {}
    gi.create_compute_instance(CI_3SLICE)
    assert host.creations == 3
    assert gpu.snapshot() == {"mode": 1, "pending": 1, "instances": [("3g.20gb", 0, (CI_3SLICE,))]}

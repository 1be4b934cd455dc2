"""The simulated NVML behaves like the real one where the kit depends on it: modes, placements, errors, UUIDs."""

import ctypes
import os

import pytest

from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GPU_MODELS
from colloc_kit.gpu.mig_live import live_catalogue
from colloc_kit.gpu.mig_simulator import simulated_gpu


@pytest.fixture
def sim():
    with nvml.use_backend(simulated_gpu("A100-40GB")) as s, nvml.session():
        yield s


def handle(sim):
    return sim.nvmlDeviceGetHandleByIndex(0)


def create(sim, profile_id, start, size):
    where = sim.c_nvmlGpuInstancePlacement_t(start, size)
    return sim.nvmlDeviceCreateGpuInstanceWithPlacement(handle(sim), profile_id, ctypes.byref(where))


def enable(sim):
    assert sim.nvmlDeviceSetMigMode(handle(sim), sim.NVML_DEVICE_MIG_ENABLE) == sim.NVML_SUCCESS


@pytest.mark.parametrize("model", list(GPU_MODELS))
def test_live_catalogue_of_the_simulator_equals_its_table(model):
    with nvml.use_backend(simulated_gpu(model)):
        live = live_catalogue(0)
    assert live.profiles == GPU_MODELS[model].profiles
    assert "(simulated)" in live.name


def test_calls_before_init_fail_like_nvml():
    s = simulated_gpu()
    with pytest.raises(s.NVMLError_Uninitialized):
        s.nvmlDeviceGetCount()


def test_error_classes_and_codes_are_pynvml_s(sim):
    with pytest.raises(sim.NVMLError) as caught:
        create(sim, 9, 0, 4)  # MIG disabled
    assert type(caught.value).__name__ == "NVMLError_NotSupported"
    assert caught.value.value == sim.NVML_ERROR_NOT_SUPPORTED == 3
    assert isinstance(sim.NVMLError(sim.NVML_ERROR_IN_USE), sim.NVMLError_InUse)
    assert nvml.is_nvml_error(caught.value)


def test_placements_are_in_memory_slices(sim):
    array = (sim.c_nvmlGpuInstancePlacement_t * 8)()
    count = ctypes.c_uint(8)
    sim.nvmlDeviceGetGpuInstancePossiblePlacements(handle(sim), 9, array, ctypes.byref(count))  # 3g.20gb
    assert [(array[i].start, array[i].size) for i in range(count.value)] == [(0, 4), (4, 4)]
    small = ctypes.c_uint(1)
    with pytest.raises(sim.NVMLError_InsufficientSize):
        sim.nvmlDeviceGetGpuInstancePossiblePlacements(handle(sim), 9, array, ctypes.pointer(small))


def test_mode_change_needs_an_idle_gpu_and_may_stay_pending():
    s = simulated_gpu("H100-80GB", needs_reset=True)
    with nvml.use_backend(s), nvml.session():
        h = s.nvmlDeviceGetHandleByIndex(0)
        assert s.nvmlDeviceSetMigMode(h, 1) == s.NVML_ERROR_RESET_REQUIRED
        assert s.nvmlDeviceGetMigMode(h) == [0, 1]
        assert s.nvmlDeviceSetMigMode(h, 0) == s.NVML_SUCCESS and s.nvmlDeviceGetMigMode(h) == [0, 0]
        s.needs_reset = False
        s.add_process(os.getpid())
        assert s.nvmlDeviceSetMigMode(h, 1) == s.NVML_ERROR_IN_USE and s.nvmlDeviceGetMigMode(h) == [0, 1]


def test_creation_rules(sim):
    enable(sim)
    with pytest.raises(sim.NVMLError_InvalidArgument):
        create(sim, 9, 2, 4)  # 3g may start at 0 or 4 only
    gi = create(sim, 9, 4, 4)
    with pytest.raises(sim.NVMLError_InsufficientResources):
        create(sim, 14, 4, 2)  # overlaps the 3g's memory slices
    assert sim.nvmlDeviceGetGpuInstanceRemainingCapacity(handle(sim), 9) == 1
    create(sim, 5, 0, 4)  # 4g + 3g: 7 compute slices
    assert sim.nvmlDeviceGetGpuInstanceRemainingCapacity(handle(sim), 19) == 0
    with pytest.raises(sim.NVMLError_InsufficientResources):
        sim.nvmlDeviceCreateGpuInstance(handle(sim), 19)  # no compute slice left
    info = sim.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, sim.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 0)
    ci = sim.nvmlGpuInstanceCreateComputeInstance(gi, info.id)
    with pytest.raises(sim.NVMLError_InUse):
        sim.nvmlGpuInstanceDestroy(gi)  # compute instances first
    sim.nvmlComputeInstanceDestroy(ci)
    sim.nvmlGpuInstanceDestroy(gi)
    with pytest.raises(sim.NVMLError_InUse):
        sim.nvmlDeviceSetMigMode(handle(sim), 0)  # the 4g still exists


def test_mig_devices_have_uuids_and_names(sim):
    enable(sim)
    gi = create(sim, 19, 6, 1)
    sim.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    mig = sim.nvmlDeviceGetMigDeviceHandleByIndex(handle(sim), 0)
    uuid = sim.nvmlDeviceGetUUID(mig)
    assert uuid.startswith("MIG-simulated-") and len(uuid) == 50  # a real one: MIG- and 36 characters
    assert sim.nvmlDeviceGetName(sim.nvmlDeviceGetHandleByUUID(uuid)) == "NVIDIA A100-SXM4-40GB MIG 1g.5gb (simulated)"
    assert sim.nvmlDeviceGetGpuInstanceId(mig) == sim.nvmlGpuInstanceGetInfo(gi).id == 13  # A100's id for 1g at 6
    assert sim.nvmlDeviceGetMemoryInfo(mig).total == 4864 * 2**20
    assert sim.nvmlDeviceIsMigDeviceHandle(mig) and not sim.nvmlDeviceIsMigDeviceHandle(handle(sim))
    assert sim.nvmlDeviceGetUUID(sim.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)).startswith("GPU-simulated-")
    with pytest.raises(sim.NVMLError_NotFound):
        sim.nvmlDeviceGetMigDeviceHandleByIndex(handle(sim), 1)


def test_gpu_instances_fill_a_caller_array(sim):
    enable(sim)
    create(sim, 14, 0, 2)
    create(sim, 14, 4, 2)
    array = (sim.c_nvmlGpuInstance_t * 4)()
    count = ctypes.c_uint(4)
    sim.nvmlDeviceGetGpuInstances(handle(sim), 14, array, ctypes.pointer(count))
    starts = [sim.nvmlGpuInstanceGetInfo(array[i]).placement.start for i in range(count.value)]
    assert sorted(starts) == [0, 4]


def test_no_permission_and_no_mig():
    s = simulated_gpu("H100-80GB", privileged=False)
    with nvml.use_backend(s), nvml.session():
        with pytest.raises(s.NVMLError_NoPermission):
            s.nvmlDeviceSetMigMode(s.nvmlDeviceGetHandleByIndex(0), 1)
    s = simulated_gpu("H100-80GB", mig_capable=False)
    with nvml.use_backend(s), nvml.session():
        with pytest.raises(s.NVMLError_NotSupported):
            s.nvmlDeviceGetMigMode(s.nvmlDeviceGetHandleByIndex(0))


def test_fail_creation_knob_fails_exactly_the_kth(sim):
    enable(sim)
    sim.fail_creation(2, sim.NVML_ERROR_UNKNOWN)
    create(sim, 19, 0, 1)
    with pytest.raises(sim.NVMLError_Unknown):
        create(sim, 19, 1, 1)
    create(sim, 19, 1, 1)
    assert [i[:2] for i in sim.snapshot()["instances"]] == [("1g.5gb", 0), ("1g.5gb", 1)]

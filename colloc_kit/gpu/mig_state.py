"""The simulated MIG hardware behind `mig_simulator`: GPUs (their GPU instances and compute instances, and the
processes on them, are `mig_instances`'s), and the rules a real GPU enforces (where an instance may start, what
capacity is left, what is refused and why). Plain objects and no NVML calling conventions: `mig_simulator` turns
handles and ctypes structures into calls here. A refused change raises pynvml's own `NVMLError` with the
code a real GPU gives.

    >>> gpu = SimulatedHost("A100-40GB").gpus[0]
    >>> gpu.set_mig_mode(True) == NVML_SUCCESS
    True
    >>> gi = gpu.create_gpu_instance(9, start=4)  # 3g.20gb at memory slice 4
    >>> gi.id, gi.memory_range, gpu.remaining_capacity(9)
    (2, range(4, 8), 1)
    >>> gpu.create_gpu_instance(14, start=4)  # 2g.10gb over the 3g's memory slices
    Traceback (most recent call last):
    pynvml.NVMLError_InsufficientResources: Insufficient resources

GPU-instance ids follow what A100s report (7g: 0, halves 1-2, quarters 3-6, eighths 7-14); real code must read
them back, never assume them. UUIDs say "simulated" (GPU-simulated-<uuid>, MIG-simulated-<uuid>), names
"(simulated)".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pynvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_ERROR_UNKNOWN,
    NVML_GPU_INSTANCE_PROFILE_COUNT,
    NVML_SUCCESS,
    NVMLError,
)

from colloc_kit.gpu.mig_catalogue import GpuModel, Profile, gpu_model
from colloc_kit.gpu.mig_instances import ComputeInstance, GpuInstance, GpuProcess, simulated_uuid
from colloc_kit.gpu.pids import alive

__all__ = ["SimulatedGpu", "SimulatedHost"]


@dataclass(eq=False)
class SimulatedGpu:
    """One simulated GPU of `model`: current and pending MIG mode, GPU instances by id, processes, and the rules for
    changing them. Enabling MIG needs an idle GPU and, with the host's `needs_reset`, a reset (`reset`)."""

    host: SimulatedHost = field(repr=False)
    index: int
    model: GpuModel
    uuid: str
    mig_capable: bool
    mig_enabled: bool
    mig_pending: bool
    gpu_instances: dict[int, GpuInstance] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    exists = True  # a GPU never goes away

    @property
    def name(self) -> str:
        """Its name, as NVML gives it, marked '(simulated)'."""
        base = self.model.nvml_names[0] if self.model.nvml_names else f"NVIDIA {self.model.name}"
        return f"{base} (simulated)"

    def device_name(self, ci: ComputeInstance | None = None) -> str:
        """The name of the GPU, or of the MIG device of `ci` ('NVIDIA A100-SXM4-40GB MIG 1g.5gb (simulated)')."""
        if ci is None:
            return self.name
        return self.name.replace(" (simulated)", f" MIG {ci.gpu_instance.profile.name} (simulated)")

    def memory_bytes(self, ci: ComputeInstance | None = None) -> tuple[int, int]:
        """(total, used) bytes of the GPU, or of the MIG device of `ci`; used is what its processes hold."""
        total_mib = ci.gpu_instance.profile.memory_mib if ci else self.model.total_memory_mib
        return total_mib * 2**20, sum(p.used_bytes for p in self.running(ci))

    # -- processes -------------------------------------------------------------------------------------------------
    def add_process(self, pid: int, device_uuid: str | None = None, used_mib: int = 500) -> None:
        """Process `pid` computes on the GPU (or on the MIG device `device_uuid`) until it exits."""
        self.processes.append(GpuProcess(pid, used_mib * 2**20, device_uuid or self.uuid))

    def remove_process(self, pid: int) -> None:
        """Process `pid` no longer computes here."""
        self.processes = [p for p in self.processes if p.pid != pid]

    def running(self, ci: ComputeInstance | None = None) -> list[GpuProcess]:
        """The processes still running on the GPU (or on the MIG device of `ci`): one that exited leaves the GPU."""
        self.processes = [p for p in self.processes if alive(p.pid)]
        return [p for p in self.processes if ci is None or p.device_uuid == ci.uuid]

    # -- MIG mode --------------------------------------------------------------------------------------------------
    def require_mig_capable(self) -> None:
        """NOT_SUPPORTED on a GPU without MIG."""
        if not self.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def require_mig(self) -> None:
        """NOT_SUPPORTED unless MIG is capable and enabled now (instances exist only then)."""
        self.require_mig_capable()
        if not self.mig_enabled:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def set_mig_mode(self, enabled: bool) -> int:
        """Ask for MIG on or off. Returns NVML_SUCCESS where the mode is now current, or why it stays pending:
        NVML_ERROR_IN_USE (processes run) or NVML_ERROR_RESET_REQUIRED (the host's `needs_reset`). Raises
        NOT_SUPPORTED without MIG, NO_PERMISSION without privilege, IN_USE for disabling with instances left."""
        self.require_mig_capable()
        self.host.require_privilege()
        if not enabled and self.gpu_instances:
            raise NVMLError(NVML_ERROR_IN_USE)
        self.mig_pending = enabled
        if enabled == self.mig_enabled:
            return NVML_SUCCESS
        if self.running():
            return NVML_ERROR_IN_USE
        if self.host.needs_reset:
            return NVML_ERROR_RESET_REQUIRED
        self.mig_enabled = enabled
        return NVML_SUCCESS

    def reset(self) -> None:
        """What an administrator's GPU reset does: the pending mode becomes current, instances are gone. IN_USE while
        processes run."""
        if self.running():
            raise NVMLError(NVML_ERROR_IN_USE)
        self.mig_enabled = self.mig_pending
        self.gpu_instances.clear()

    # -- profiles and GPU instances --------------------------------------------------------------------------------
    def profile_by_id(self, profile_id: int) -> Profile:
        """The GPU-instance profile with id `profile_id` (19 for 1g.10gb on H100); INVALID_ARGUMENT if none."""
        self.require_mig_capable()
        for p in self.model.profiles:
            if p.profile_id == profile_id:
                return p
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def profile_by_enum(self, enum: int) -> Profile:
        """The GPU-instance profile of NVML_GPU_INSTANCE_PROFILE_* `enum`; INVALID_ARGUMENT outside the enum,
        NOT_SUPPORTED for one this model lacks."""
        self.require_mig_capable()
        if not 0 <= enum < NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        for p in self.model.profiles:
            if p.nvml_profile == enum:
                return p
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def fits(self, profile: Profile, start: int) -> bool:
        """Whether an instance of `profile` at allowed start `start` fits now: its memory slices free, enough
        compute slices left, and fewer than the profile's instance limit."""
        taken = {s for gi in self.gpu_instances.values() for s in gi.memory_range}
        compute = sum(gi.profile.compute_slices for gi in self.gpu_instances.values())
        same = sum(1 for gi in self.gpu_instances.values() if gi.profile == profile)
        return not (taken & set(range(start, start + profile.memory_slices))
                    or compute + profile.compute_slices > self.model.compute_slices
                    or same >= profile.max_instances)

    def remaining_capacity(self, profile_id: int) -> int:
        """How many of the profile's placements an instance could be created at now."""
        self.require_mig()
        profile = self.profile_by_id(profile_id)
        return sum(1 for start in profile.placements if self.fits(profile, start))

    def create_gpu_instance(self, profile_id: int, start: int | None = None, size: int | None = None) -> GpuInstance:
        """A new GPU instance of `profile_id` at memory slice `start` (`size` slices, if given), or at the first
        placement that fits. INVALID_ARGUMENT for a placement the profile does not allow, INSUFFICIENT_RESOURCES
        where it does not fit, NO_PERMISSION without privilege; an injected failure (`SimulatedHost.fail_creation`)."""
        self.require_mig()
        profile = self.profile_by_id(profile_id)
        if start is None:
            start = next((s for s in profile.placements if self.fits(profile, s)), None)
            if start is None:
                raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        elif start not in profile.placements or size not in (None, profile.memory_slices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        self.host.require_privilege()
        if not self.fits(profile, start):
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        self.host.count_creation()
        # ids as A100s report them: a node of the binary tree over the memory slices (7g: 0, 4-slice halves 1-2, ...)
        gi_id = self.model.memory_slices // profile.memory_slices - 1 + start // profile.memory_slices
        gi = GpuInstance(self, gi_id, profile, start)
        self.gpu_instances[gi_id] = gi
        return gi

    def gpu_instances_of(self, profile_id: int) -> list[GpuInstance]:
        """Its GPU instances of `profile_id`, by id."""
        self.require_mig()
        self.profile_by_id(profile_id)
        return [gi for _, gi in sorted(self.gpu_instances.items()) if gi.profile.profile_id == profile_id]

    def gpu_instance(self, gi_id: int) -> GpuInstance:
        """The GPU instance with id `gi_id`; NOT_FOUND if none."""
        self.require_mig()
        if gi_id not in self.gpu_instances:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self.gpu_instances[gi_id]

    # -- MIG devices -----------------------------------------------------------------------------------------------
    def mig_devices(self) -> list[ComputeInstance]:
        """Every compute instance (each is a MIG device), ordered by GPU-instance id, then compute-instance id."""
        self.require_mig()
        return self._compute_instances()

    def mig_device(self, uuid: str) -> ComputeInstance | None:
        """The compute instance whose MIG device has `uuid`, or None."""
        return next((ci for ci in self._compute_instances() if ci.uuid == uuid), None)

    def snapshot(self) -> dict:
        """Its MIG state in plain values: mode and pending mode (1 enabled, 0 disabled, as NVML says), instances as
        (profile name, start, compute-instance profiles)."""
        return {"mode": int(self.mig_enabled), "pending": int(self.mig_pending),
                "instances": sorted((gi.profile.name, gi.start, tuple(sorted(ci.profile for ci in
                                                                             gi.compute_instances.values())))
                                    for gi in self.gpu_instances.values())}

    def _compute_instances(self) -> list[ComputeInstance]:
        return [ci for _, gi in sorted(self.gpu_instances.items()) for _, ci in sorted(gi.compute_instances.items())]


class SimulatedHost:
    """The simulated GPUs of one machine, all of `model`, and the machine's knobs: whether this process may change
    MIG (`privileged`), whether a mode change waits for a GPU reset (`needs_reset`), injected creation failures.

    >>> host = SimulatedHost("H100-80GB", gpus=2, mig_enabled=True)
    >>> [(g.index, g.mig_enabled, g.uuid[:14]) for g in host.gpus]
    [(0, True, 'GPU-simulated-'), (1, True, 'GPU-simulated-')]
    """

    def __init__(self, model: str | GpuModel = "H100-80GB", gpus: int = 1, *, mig_enabled: bool = False,
                 needs_reset: bool = False, privileged: bool = True, mig_capable: bool = True):
        self.model = gpu_model(model)
        self.needs_reset = needs_reset
        self.privileged = privileged
        self.creations = 0  # GPU and compute instances created so far (failed attempts included)
        self._fail_at: dict[int, int] = {}
        self.gpus = [SimulatedGpu(self, index, self.model, f"GPU-{simulated_uuid(f'{self.model.name}/{index}')}",
                                  mig_capable, mig_enabled, mig_enabled) for index in range(gpus)]

    def fail_creation(self, k: int, code: int = NVML_ERROR_UNKNOWN) -> None:
        """Make the k-th creation from now (GPU or compute instance, counting from 1) fail with NVML error `code`."""
        self._fail_at[self.creations + k] = code

    def count_creation(self) -> int:
        """Count one creation and return its number; raises the failure injected for it, if any."""
        self.creations += 1
        code = self._fail_at.pop(self.creations, None)
        if code is not None:
            raise NVMLError(code)
        return self.creations

    def require_privilege(self) -> None:
        """NO_PERMISSION unless this process may change MIG."""
        if not self.privileged:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)

    def find(self, uuid: str) -> SimulatedGpu | ComputeInstance | None:
        """The GPU, or the compute instance of the MIG device, with `uuid`; None if none."""
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
            ci = gpu.mig_device(uuid)
            if ci is not None:
                return ci
        return None

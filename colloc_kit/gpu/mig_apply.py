"""Apply a MIG layout through NVML and put back exactly what was there: a journal of undo steps.

`MigLayout` is a context manager. Constructing it changes nothing. `preflight()` reads the GPU and refuses
(BadInput / GpuStateError) what cannot work: no MIG, no privilege, processes on the GPU, a pending mode change,
a layout that does not fit. `apply()` records the MIG mode and instances, enables MIG if needed (a GPU that
wants a reset for that is left as found, with instructions: the kit never resets a GPU), destroys existing
instances only when `allow_destroy` and only when the layout does not fit beside them, creates the planned GPU
instances at their placements with one full compute instance each, and maps them to MIG device UUIDs. Every
change pushes its undo step; a failure half-way (also Ctrl-C) undoes what was done. `restore()` undoes all. What
was there is read by `mig_read`.

    >>> with MigLayout("3g,2g,1g,1g", gpu=0) as mig:            # doctest: +SKIP
    ...     [c.uuid for c in mig.created]
    ['MIG-4f1c...', 'MIG-9a2e...', 'MIG-77d0...', 'MIG-0b3c...']
    >>> print("\\n".join(MigLayout("3g,2g", gpu=0).commands()))   # doctest: +SKIP
    nvidia-smi -i 0 -mig 1
    nvidia-smi mig -i 0 -cgi 9:0,14:4 -C
"""

from __future__ import annotations

import ctypes
import shlex
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from colloc_kit.errors import BadInput, GpuStateError
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GpuModel, Profile
from colloc_kit.gpu.mig_live import live_catalogue
from colloc_kit.gpu.mig_planner import PlacedInstance, Plan, plan
from colloc_kit.gpu.mig_read import (
    MIG_CONFIG_CAPABILITY, ExistingInstance, MigState, compute_instances, mig_config_access, mig_device_uuids,
    mode_name, read_state,
)

__all__ = ["CreatedInstance", "IN_USE_RETRY_S", "MigLayout"]

IN_USE_RETRY_S = 10.0  # a killed process's CUDA context can take a moment to leave the GPU


@dataclass(frozen=True)
class CreatedInstance:
    """A GPU instance the kit created, its compute instance, and the MIG device UUID jobs select it by."""

    placed: PlacedInstance
    gi_id: int
    ci_id: int
    uuid: str


class MigLayout:
    """Apply a layout to GPU `gpu` on entry, restore the previous MIG state on exit (every exit path)."""

    def __init__(self, layout: Any, gpu: int = 0, allow_destroy: bool = False) -> None:
        self.layout = layout
        self.gpu = gpu
        self.allow_destroy = allow_destroy
        self.catalogue: GpuModel | None = None
        self.before: MigState | None = None
        self.plan: Plan | None = None
        self.to_destroy: tuple[ExistingInstance, ...] = ()
        self.created: list[CreatedInstance] = []
        self.problems: list[str] = []
        self._undo: list[tuple[str, Callable[[], None]]] = []

    # -- read-only ------------------------------------------------------------------------------------------------
    def preflight(self) -> Plan:
        """Read the GPU and plan; refuse, before anything changes, what cannot be applied."""
        with nvml.session() as lib:
            handle = lib.nvmlDeviceGetHandleByIndex(self.gpu)
            name = nvml.text(lib.nvmlDeviceGetName(handle))
            if nvml.optional(lib.nvmlDeviceGetMigMode, handle).value is None:
                raise BadInput(f"GPU {self.gpu} ({name}) does not support MIG; MIG needs an A100, A30, H100, H200 "
                               f"or newer data-centre GPU. Use mode mps or naive on this GPU")
            self.catalogue = live_catalogue(self.gpu)
            self.before = read_state(lib, handle, self.catalogue)
            if self.before.mode != self.before.pending:
                raise GpuStateError(
                    f"GPU {self.gpu} has a MIG mode change pending (now {mode_name(self.before.mode)}, pending "
                    f"{mode_name(self.before.pending)}): it takes effect after a GPU reset or reboot, which the kit "
                    f"never does. Ask the administrator to reset/reboot, or cancel it with "
                    f"`nvidia-smi -i {self.gpu} -mig {self.before.mode}`", gpu=self.gpu)
            self.plan, self.to_destroy = self._plan_around(self.before.instances)
            self._refuse_busy(lib, handle)
            if not mig_config_access(lib):
                raise BadInput(
                    f"changing MIG needs root or read access to {MIG_CONFIG_CAPABILITY} (see the MIG user guide, "
                    f"'Device Nodes and Capabilities'); run as root, or have an administrator grant the capability. "
                    f"Nothing was changed")
        return self.plan

    def _plan_around(self, existing: tuple[ExistingInstance, ...]) -> tuple[Plan, tuple[ExistingInstance, ...]]:
        catalogue = self.catalogue
        assert catalogue is not None  # preflight read it first
        if not existing:
            return plan(self.layout, catalogue), ()
        occupied = [(i.start, i.size) for i in existing]
        compute = sum(self._profile(i.profile_id).compute_slices for i in existing)
        try:
            return plan(self.layout, catalogue, occupied, compute), ()
        except BadInput as beside:
            if not self.allow_destroy:
                found = ", ".join(f"{i.profile}@{i.start} (GI {i.gi_id})" for i in existing)
                raise BadInput(f"GPU {self.gpu} already has MIG instances {found}, and {beside} Allow the kit to "
                               f"destroy them (option allow_destroy; it recreates them afterwards), or free the GPU"
                               ) from None
        return plan(self.layout, catalogue), existing

    def _profile(self, profile_id: int) -> Profile:
        assert self.catalogue is not None  # preflight read it first
        return next(p for p in self.catalogue.profiles if p.profile_id == profile_id)

    def _refuse_busy(self, lib: Any, handle: Any) -> None:
        assert self.before is not None  # preflight read it first
        enabling = self.before.mode != lib.NVML_DEVICE_MIG_ENABLE
        devices = [handle] if enabling else []
        destroyed = {u for i in self.to_destroy for u in i.uuids}
        devices += [lib.nvmlDeviceGetHandleByUUID(u) for u in sorted(destroyed)]
        pids = sorted({p.pid for d in devices for p in lib.nvmlDeviceGetComputeRunningProcesses(d)})
        if pids:
            what = "enabling MIG" if enabling else "destroying the MIG instances in the way"
            raise GpuStateError(f"processes {pids} use GPU {self.gpu}, and {what} needs it idle; stop them "
                                f"(see `nvidia-smi`) and run again. Nothing was changed", gpu=self.gpu)

    def _preflown(self) -> tuple[Plan, MigState]:
        """The plan and the MIG state before it, running preflight() first if it has not run."""
        if self.plan is None:
            self.preflight()
        assert self.plan is not None and self.before is not None  # preflight set both, or raised
        return self.plan, self.before

    def commands(self) -> list[str]:
        """The `nvidia-smi` commands equal to what apply() would do now, and (as comments) what restore() does."""
        planned, before = self._preflown()
        g = self.gpu
        lines = []
        enable = before.mode != 1
        if enable:
            lines.append(shlex.join(["nvidia-smi", "-i", str(g), "-mig", "1"]))
        for inst in self.to_destroy:
            lines += [shlex.join(["nvidia-smi", "mig", "-i", str(g), "-dci", "-gi", str(inst.gi_id)]),
                      shlex.join(["nvidia-smi", "mig", "-i", str(g), "-dgi", "-gi", str(inst.gi_id)])]
        tuples = ",".join(f"{i.profile.profile_id}:{i.start}" for i in planned.creation_order())
        lines.append(shlex.join(["nvidia-smi", "mig", "-i", str(g), "-cgi", tuples, "-C"]))
        lines.append(f"# on exit: nvidia-smi mig -i {g} -dci -gi <id> and -dgi -gi <id> for each instance created")
        for inst in self.to_destroy:
            lines.append(f"# on exit: nvidia-smi mig -i {g} -cgi {inst.profile_id}:{inst.start} -C  (recreate "
                         f"{inst.profile}, GI {inst.gi_id} before)")
        if enable:
            lines.append(f"# on exit: nvidia-smi -i {g} -mig 0")
        return lines

    # -- changes, each with its undo ------------------------------------------------------------------------------
    def apply(self) -> list[CreatedInstance]:
        """Change the GPU to the planned layout; on any failure undo what was done and re-raise."""
        planned, before = self._preflown()
        try:
            with nvml.session() as lib:
                handle = lib.nvmlDeviceGetHandleByIndex(self.gpu)
                if before.mode != lib.NVML_DEVICE_MIG_ENABLE:
                    self._enable_mig(lib, handle)
                for inst in self.to_destroy:
                    self._destroy_existing(lib, handle, inst)
                for placed in planned.creation_order():
                    self._create(lib, handle, placed)
                uuids = mig_device_uuids(lib, handle)
                order = {id(p): n for n, p in enumerate(planned.instances)}
                self.created = sorted(
                    (CreatedInstance(c.placed, c.gi_id, c.ci_id, uuids[(c.gi_id, c.ci_id)]) for c in self.created),
                    key=lambda c: order[id(c.placed)])
        except BaseException:
            problems = self.restore()
            if problems:
                warnings.warn("MIG rollback was incomplete: " + "; ".join(problems), RuntimeWarning, stacklevel=2)
            raise
        return self.created

    def _enable_mig(self, lib: Any, handle: Any) -> None:
        status = lib.nvmlDeviceSetMigMode(handle, lib.NVML_DEVICE_MIG_ENABLE)
        current, _ = lib.nvmlDeviceGetMigMode(handle)
        if status == lib.NVML_SUCCESS and current == lib.NVML_DEVICE_MIG_ENABLE:
            self._undo.append(("disable MIG mode", lambda: _set_mode(self.gpu, lib.NVML_DEVICE_MIG_DISABLE)))
            return
        lib.nvmlDeviceSetMigMode(handle, lib.NVML_DEVICE_MIG_DISABLE)  # cancel the pending change: as found
        if status == lib.NVML_ERROR_RESET_REQUIRED:
            raise GpuStateError(
                f"GPU {self.gpu} needs a GPU reset to enable MIG (usual in pass-through VMs and on some platforms); "
                f"the kit never resets a GPU and left MIG disabled. An administrator can run "
                f"`nvidia-smi -i {self.gpu} -mig 1`, then reset the GPU or reboot; run again afterwards "
                f"(the kit then leaves MIG enabled, as it found it)", gpu=self.gpu)
        raise GpuStateError(f"enabling MIG on GPU {self.gpu} did not take effect ({_error_text(lib, status)}); "
                            f"MIG was left disabled. Stop the processes using the GPU (see `nvidia-smi`) and retry",
                            gpu=self.gpu)

    def _destroy_existing(self, lib: Any, handle: Any, inst: ExistingInstance) -> None:
        gi = lib.nvmlDeviceGetGpuInstanceById(handle, inst.gi_id)
        for ci in compute_instances(lib, gi):
            lib.nvmlComputeInstanceDestroy(ci)
        lib.nvmlGpuInstanceDestroy(gi)
        self._undo.append((f"recreate {inst.profile}@{inst.start}", lambda: _recreate(self.gpu, inst)))

    def _create(self, lib: Any, handle: Any, placed: PlacedInstance) -> None:
        where = lib.c_nvmlGpuInstancePlacement_t()
        where.start, where.size = placed.start, placed.size
        gi = lib.nvmlDeviceCreateGpuInstanceWithPlacement(handle, placed.profile.profile_id, ctypes.byref(where))
        gi_id = lib.nvmlGpuInstanceGetInfo(gi).id
        self._undo.append((f"destroy GPU instance {placed.label()}", lambda: _destroy_gi(self.gpu, gi_id)))
        info = lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, placed.profile.ci_profile, lib.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        ci = lib.nvmlGpuInstanceCreateComputeInstance(gi, info.id)
        ci_id = lib.nvmlComputeInstanceGetInfo(ci).id
        self._undo.append((f"destroy compute instance {ci_id} of {placed.label()}",
                           lambda: _destroy_ci(self.gpu, gi_id, ci_id)))
        self.created.append(CreatedInstance(placed, gi_id, ci_id, ""))

    def restore(self) -> list[str]:
        """Undo every change, newest first; each step is tried even if one fails. Returns what could not be undone."""
        problems = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:
                problems.append(f"could not {what} on GPU {self.gpu}: {nvml.describe_error(exc)}")
        self.created = []
        self.problems += problems
        return problems

    def __enter__(self) -> "MigLayout":
        self.apply()
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        problems = self.restore()
        if problems:
            _report(problems, self.gpu, raise_=exc_type is None)


# -- undo steps: each opens its own NVML session, so that they also run after the apply session ended -------------
def _set_mode(gpu: int, mode: int) -> None:
    with nvml.session() as lib:
        handle = lib.nvmlDeviceGetHandleByIndex(gpu)
        status = lib.nvmlDeviceSetMigMode(handle, mode)
        if status != lib.NVML_SUCCESS:
            raise GpuStateError(f"the MIG mode change is pending ({_error_text(lib, status)}); it takes effect "
                                f"after a GPU reset, or set it back with `nvidia-smi -i {gpu} -mig {1 - mode}`",
                                gpu=gpu)


def _destroy_gi(gpu: int, gi_id: int) -> None:
    with nvml.session() as lib:
        lib.nvmlGpuInstanceDestroy(lib.nvmlDeviceGetGpuInstanceById(lib.nvmlDeviceGetHandleByIndex(gpu), gi_id))


def _destroy_ci(gpu: int, gi_id: int, ci_id: int) -> None:
    """Destroy a compute instance; while NVML says IN_USE (a killed job's context still leaving), retry a while."""
    deadline = time.monotonic() + IN_USE_RETRY_S
    with nvml.session() as lib:
        gi = lib.nvmlDeviceGetGpuInstanceById(lib.nvmlDeviceGetHandleByIndex(gpu), gi_id)
        ci = lib.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id)
        while True:
            try:
                return lib.nvmlComputeInstanceDestroy(ci)
            except lib.NVMLError as exc:
                if exc.value != lib.NVML_ERROR_IN_USE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _recreate(gpu: int, inst: ExistingInstance) -> None:
    with nvml.session() as lib:
        handle = lib.nvmlDeviceGetHandleByIndex(gpu)
        where = lib.c_nvmlGpuInstancePlacement_t()
        where.start, where.size = inst.start, inst.size
        gi = lib.nvmlDeviceCreateGpuInstanceWithPlacement(handle, inst.profile_id, ctypes.byref(where))
        for profile_id, start, size in inst.compute_instances:
            at = lib.c_nvmlComputeInstancePlacement_t()
            at.start, at.size = start, size
            lib.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, profile_id, ctypes.byref(at))


def _report(problems: list[str], gpu: int, raise_: bool) -> None:
    text = ("MIG state not fully restored: " + "; ".join(problems)
            + f". Check with `colloc-kit mig show` and `nvidia-smi mig -i {gpu} -lgi`; processes still on the "
              f"instances (`nvidia-smi`) must exit before the instances can go")
    if raise_:
        raise GpuStateError(text, gpu=gpu)
    warnings.warn(text, RuntimeWarning, stacklevel=3)




def _error_text(lib: Any, code: int) -> str:
    return str(lib.NVMLError(code))

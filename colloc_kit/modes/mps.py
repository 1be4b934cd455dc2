"""The `mps` sharing mode: all jobs as clients of one private MPS daemon, with optional per-job limits.

Options (all optional; each limit is one value for every job, or a list with one value per job):

- `thread_percentage`: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, 1-100 (the share of SMs a job may use).
- `memory_limit_mb`: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in MiB, at most the card's memory.
- `client_priority`: CUDA_MPS_CLIENT_PRIORITY, 0 (normal) or 1 (below normal): an inference job at normal priority
  beside training jobs below it. In NVIDIA's MPS guide from release r550 (driver 550 and later).
- `partitions`: a MIG-like layout such as ["3g", "2g", "1g", "1g"] (or MIG profile names, "3g.40gb"), turned into
  thread percentages and memory limits proportional to MIG slices (e.g. 7 compute and 8 memory slices on A100/H100).
  These are MPS PARTITIONS, NOT MIG: no hardware isolation of caches, memory bandwidth or faults.
- `exclusive_process`: set compute mode EXCLUSIVE_PROCESS while the mode runs (root only, on a machine you own,
  with COLLOC_KIT_ALLOW_COMPUTE_MODE=1 set; the old mode is restored). Never needed; off by default.
- `control`: the control program (default: nvidia-cuda-mps-control from PATH).
- `reuse_pipe_dir`: use the MPS daemon already running with this pipe directory; the kit neither starts nor stops it.

    >>> spec = ModeSpec("mps", {"partitions": ["3g", "2g", "1g", "1g"]})           # doctest: +SKIP
    >>> with make_mode(spec, workdir=run_dir, gpu=0, device="cuda") as mode:        # doctest: +SKIP
    ...     [s.info for s in mode.slots(2)]
    [{'thread_percentage': 42, 'memory_limit_mb': 40779, 'partition': '3g.40gb (MPS partition, not MIG)'},
     {'thread_percentage': 28, 'memory_limit_mb': 20389, 'partition': '2g.20gb (MPS partition, not MIG)'}]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput, CollocKitError, GpuStateError
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GPU_MODELS, GpuModel, Profile, gpu_model, model_for_device, resolve
from colloc_kit.gpu.mps_daemon import MpsDaemon, find_control
from colloc_kit.gpu.mps_detect import blocking_daemons, describe_daemons, refuse_running_daemons
from colloc_kit.modes.base import Option, SharingMode, Slot

__all__ = ["COMPUTE_MODE_GUARD", "GENERIC_MIG_SHAPE", "MpsMode", "PARTITION_KIND", "partition_share"]

PARTITION_KIND = "MPS partition (not MIG)"
COMPUTE_MODE_GUARD = "COLLOC_KIT_ALLOW_COMPUTE_MODE"
GENERIC_MIG_SHAPE = "H100-80GB"  # slices used for MIG-like partitions on a GPU without a built-in MIG table


@dataclass(frozen=True)
class _Card:
    uuid: str
    name: str
    memory_mib: int
    mig_shape: GpuModel


@dataclass(frozen=True)
class _Limits:
    thread_percentage: int | None
    memory_limit_mb: int | None
    partition: str | None


class MpsMode(SharingMode):
    """Jobs share the GPU through a private MPS daemon (one CUDA context for all; kernels of all jobs run at once)."""

    name = "mps"
    takes = (
        Option("thread_percentage", int, "active thread % per job, 1-100 (one, or one per job)", many=True),
        Option("memory_limit_mb", int, "pinned device memory limit per job, MiB (one, or one per job)", many=True),
        Option("partitions", str, "MIG-like layout, e.g. 3g,2g,1g,1g (an MPS partition, not MIG)", many=True),
        Option("client_priority", int, "CUDA_MPS_CLIENT_PRIORITY per job: 0 normal, 1 below normal (one, or one per "
                                       "job; NVIDIA's MPS guide from r550, driver 550+)", many=True),
        Option("exclusive_process", bool, "compute mode EXCLUSIVE_PROCESS while the mode runs (root, with "
                                          f"{COMPUTE_MODE_GUARD}=1; never needed)"),
        Option("control", str, "the MPS control program (default: nvidia-cuda-mps-control from PATH)"),
        Option("reuse_pipe_dir", str, "use the MPS daemon already running with this pipe directory"),
    )

    def __init__(self, workdir: Path, gpu: int = 0, device: str = "cuda", **options: Any) -> None:
        super().__init__(workdir, gpu, device, **options)
        self.daemon: MpsDaemon | None = None
        self._card: _Card | None = None
        self._old_compute_mode: int | None = None

    # -- validation, before anything changes --------------------------------------------------------------------
    @classmethod
    def validate_options(cls, options: dict, device: str) -> None:
        """Refuse limits out of range, partitions beside limits, a CPU run, before anything is read."""
        super().validate_options(options, device)
        if device != "cuda":
            raise BadInput(f"mode mps needs a CUDA GPU, but the jobs run on {device!r}; use device cuda, or mode naive")
        _values("thread_percentage", options.get("thread_percentage"), 1, 100)
        _values("memory_limit_mb", options.get("memory_limit_mb"), 1, None)
        _values("client_priority", options.get("client_priority"), 0, 1)
        partitions = options.get("partitions")
        if partitions is not None:
            if options.get("thread_percentage") is not None or options.get("memory_limit_mb") is not None:
                raise BadInput("mode mps: give either partitions or thread_percentage/memory_limit_mb, not both "
                               "(a partition sets both limits)")
            if isinstance(partitions, str) or not isinstance(partitions, (list, tuple)) or not partitions:
                raise BadInput(f"mode mps: partitions is a list of MIG-like profiles such as ['3g', '2g', '1g', '1g'], "
                               f"got {partitions!r}")
            for name in partitions:
                _resolve_anywhere(name)
        if not isinstance(options.get("exclusive_process", False), bool):
            raise BadInput(f"mode mps: exclusive_process is true or false, got {options['exclusive_process']!r}")
        if options.get("exclusive_process"):
            _refuse_compute_mode_change()
        for key in ("control", "reuse_pipe_dir"):
            if options.get(key) is not None and not isinstance(options[key], str):
                raise BadInput(f"mode mps: {key} is a path, got {options[key]!r}")

    @classmethod
    def unavailable_here(cls, device: str = "cuda", gpu: int = 0) -> str | None:
        """Why not here: no CUDA GPU, a GPU in MIG mode, no MPS control program, or an MPS daemon in the way."""
        if device != "cuda":
            return f"needs a CUDA GPU; the jobs run on {device!r}"
        try:
            card = cls(workdir=Path("."), gpu=gpu, device=device)._read_card()
            find_control()
        except CollocKitError as exc:
            return str(exc)
        daemons = blocking_daemons(device=card.uuid)
        return f"an MPS daemon already runs here ({describe_daemons(daemons)})" if daemons else None

    def check(self, n_jobs: int) -> None:
        """Refuse what cannot run, before anything changes: limits for n_jobs, the card, the machine's MPS state."""
        self._limits(n_jobs)
        find_control(self.options.get("control"))
        refuse_running_daemons(blocking_daemons(allow_pipe_dir=self.options.get("reuse_pipe_dir"),
                                                device=self._read_card().uuid))

    def _limits(self, n_jobs: int) -> list[_Limits]:
        card = self._read_card()
        partitions = self.options.get("partitions")
        if partitions is not None:
            return _partition_limits([resolve(p, card.mig_shape) for p in partitions], card, n_jobs)
        threads = _per_job("thread_percentage", self.options.get("thread_percentage"), n_jobs)
        memory = _per_job("memory_limit_mb", self.options.get("memory_limit_mb"), n_jobs)
        for mb in filter(None, memory):
            if mb > card.memory_mib:
                raise BadInput(f"mode mps: memory_limit_mb {mb} is more than {card.name} has ({card.memory_mib} MiB); "
                               f"give at most {card.memory_mib}")
        return [_Limits(t, m, None) for t, m in zip(threads, memory)]

    def _read_card(self) -> _Card:
        if self._card is None:
            with nvml.session() as lib:
                try:
                    device = nvml.Device.at(lib, self.gpu)
                except Exception as exc:
                    if not nvml.is_nvml_error(exc):
                        raise
                    raise BadInput(f"GPU {self.gpu} does not exist ({nvml.describe_error(exc)}); this machine has "
                                   f"{lib.nvmlDeviceGetCount()} GPU(s), numbered from 0") from None
                name, mig = device.name, device.read("nvmlDeviceGetMigMode").value
                if mig and mig[0]:
                    raise GpuStateError(f"GPU {self.gpu} ({name}) is in MIG mode: a daemon for the whole GPU serves no "
                                        f"client; use mode mig with its mps option (one MPS daemon per instance)",
                                        gpu=self.gpu)
                self._card = _Card(uuid=device.uuid, name=name, memory_mib=device.memory_mib,
                                   mig_shape=model_for_device(name) or gpu_model(GENERIC_MIG_SHAPE))
        return self._card

    # -- the GPU changes here, and is restored on every exit path ------------------------------------------------
    def __enter__(self) -> "MpsMode":
        card = self._read_card()
        self.check(1)
        try:
            if self.options.get("exclusive_process"):
                self._set_exclusive_process()
            self.daemon = MpsDaemon(card.uuid, self.workdir / "mps", self.options.get("control"),
                                    reuse_pipe_dir=self.options.get("reuse_pipe_dir"))
            self.daemon.start()
        except BaseException:
            self._restore_compute_mode()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            if self.daemon is not None:
                self.daemon.stop()
        finally:
            self._restore_compute_mode()

    def _set_exclusive_process(self) -> None:
        _refuse_compute_mode_change()
        with nvml.session() as lib:
            handle = lib.nvmlDeviceGetHandleByIndex(self.gpu)
            self._old_compute_mode = lib.nvmlDeviceGetComputeMode(handle)
            lib.nvmlDeviceSetComputeMode(handle, lib.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)

    def _restore_compute_mode(self) -> None:
        if self._old_compute_mode is None:
            return
        with nvml.session() as lib:
            lib.nvmlDeviceSetComputeMode(lib.nvmlDeviceGetHandleByIndex(self.gpu), self._old_compute_mode)
        self._old_compute_mode = None

    # -- slots and records -------------------------------------------------------------------------------------
    def slots(self, n_jobs: int) -> list[Slot]:
        """One client slot per job of the running daemon, with its thread and memory limits."""
        if self.daemon is None:
            raise RuntimeError("MpsMode.slots() is called inside `with mode:`")
        slots = []
        priorities = _per_job("client_priority", self.options.get("client_priority"), n_jobs)
        for i, limits in enumerate(self._limits(n_jobs)):
            env = self.daemon.client_env()
            if priorities[i] is not None:  # an inference job at normal priority beside training below it
                env["CUDA_MPS_CLIENT_PRIORITY"] = str(priorities[i])
            if limits.thread_percentage is not None:
                env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(limits.thread_percentage)
            if limits.memory_limit_mb is not None:
                env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={limits.memory_limit_mb}M"  # device 0: the one visible
            label = f"mps-{i} {limits.partition} {PARTITION_KIND}" if limits.partition else f"mps-{i}"
            partition = f"{limits.partition} (MPS partition, not MIG)" if limits.partition else None
            priority = {} if priorities[i] is None else {"client_priority": priorities[i]}
            slots.append(Slot(label=label, env=env, info={"thread_percentage": limits.thread_percentage,
                                                           "memory_limit_mb": limits.memory_limit_mb,
                                                           "partition": partition, **priority}))
        return slots

    def state(self) -> dict[str, Any]:
        """MPS or MPS partitions, the daemon's state, the slices the partitions were cut from."""
        partitioned = self.options.get("partitions") is not None
        state: dict[str, Any] = {"name": self.name, "options": self.options,
                                 "kind": PARTITION_KIND if partitioned else "MPS",
                                 "daemon": self.daemon.state() if self.daemon else None}
        if partitioned and self._card is not None:
            shape, card = self._card.mig_shape, self._card
            state["partition_slices"] = (f"{shape.compute_slices} compute and {shape.memory_slices} memory slices "
                                         f"as on {shape.name}, scaled to {card.name} ({card.memory_mib} MiB)")
        if self.options.get("exclusive_process"):
            state["compute_mode"] = "EXCLUSIVE_PROCESS while the mode ran; the old mode is restored on exit"
        return state

    def problems(self) -> list[str]:
        """The server fault, if any (it ends every client of the server), and a daemon that died mid-run."""
        if self.daemon is None:
            return []
        found = []
        fault = self.daemon.server_fault()
        if fault:
            found.append(f"MPS server fault: a client's fatal error ends every client of the server: {fault}")
        if self.daemon.owned and not self.daemon.alive():
            found.append("the MPS control daemon exited during the run; jobs that started after that ran without "
                         f"MPS; see {self.daemon.log_dir}")
        return found


def _values(key: str, value: Any, low: int, high: int | None) -> None:
    """Refuse a limit (one int or a list of ints) outside [low, high]; nothing to check when not given."""
    if value is None:
        return
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    bound = f"{low}-{high}" if high is not None else f">= {low}"
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v < low or (high is not None and v > high):
            raise BadInput(f"mode mps: {key} must be a whole number {bound} (or a list of them, one per job), "
                           f"got {v!r}")
    if not values:
        raise BadInput(f"mode mps: {key} is an empty list; give one value, or one per job")


def _per_job(key: str, value: Any, n_jobs: int) -> list[int | None]:
    """One value per job: a single value (or one-element list) for all, or a list with at least n_jobs values."""
    values = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        return [None] * n_jobs
    if len(values) == 1:
        return values * n_jobs
    if len(values) < n_jobs:
        raise BadInput(f"mode mps: {key} lists {len(values)} values but the run has {n_jobs} jobs; "
                       f"give one value for all, or at least one per job")
    return values[:n_jobs]


def _partition_limits(profiles: list, card: _Card, n_jobs: int) -> list[_Limits]:
    """Limits proportional to the MIG slices of each profile: compute slices -> SM share, memory slices -> MiB."""
    shape = card.mig_shape
    names = "+".join(p.short for p in profiles)
    compute = sum(p.compute_slices for p in profiles)
    memory = sum(p.memory_slices for p in profiles)
    if compute > shape.compute_slices or memory > shape.memory_slices:
        raise BadInput(f"mode mps: partitions {names} need {compute} compute and {memory} memory slices; "
                       f"a MIG-shaped GPU ({shape.name}) has {shape.compute_slices} and {shape.memory_slices}; "
                       f"use fewer or smaller partitions, e.g. 3g,2g,1g,1g or 7x1g")
    if n_jobs > len(profiles):
        raise BadInput(f"mode mps: partitions {names} give {len(profiles)} slots but the run has {n_jobs} jobs; "
                       f"give one partition per job (the first n_jobs partitions are used)")
    return [_Limits(*partition_share(p, shape, card.memory_mib), partition=p.name) for p in profiles[:n_jobs]]


def partition_share(profile: Profile, shape: GpuModel, card_memory_mib: int) -> tuple[int, int]:
    """(thread percentage, memory limit MiB) that give one job the SM and memory share of a MIG profile.

    >>> partition_share(resolve("3g", "H100-80GB"), gpu_model("H100-80GB"), 81559)
    (42, 40779)
    """
    return (max(1, 100 * profile.compute_slices // shape.compute_slices),
            card_memory_mib * profile.memory_slices // shape.memory_slices)


def _resolve_anywhere(name: Any) -> None:
    """Refuse a partition name that is no MIG profile of any known GPU (the card's own table is checked later)."""
    if not isinstance(name, str):
        raise BadInput(f"mode mps: a partition is a MIG-like profile name such as '3g' or '3g.40gb', got {name!r}")
    for model in GPU_MODELS:
        try:
            resolve(name, model)
            return
        except BadInput:
            continue
    try:
        resolve(name, GENERIC_MIG_SHAPE)
    except BadInput as exc:  # the names valid on the generic shape, e.g. 1g, 2g, 3g, 4g, 7g
        raise BadInput(f"mode mps: partitions: {exc}") from None


def _refuse_compute_mode_change() -> None:
    if os.environ.get(COMPUTE_MODE_GUARD) != "1" or os.geteuid() != 0:
        raise BadInput(f"mode mps: exclusive_process changes the GPU's compute mode, which only root may do and only "
                       f"on a machine you own (never on a shared or lent GPU); to allow it, run as root with "
                       f"{COMPUTE_MODE_GUARD}=1. MPS works without it: leave exclusive_process off")

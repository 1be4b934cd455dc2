"""The `mig` sharing mode: the GPU split into MIG instances, one job per instance (or MPS inside each instance).

Options:

- `layout` (required): MIG profiles, one per job, as a list or a comma string: "3g.40gb,2g.20gb,1g.10gb,1g.10gb",
  short forms ("3g,2g,1g,1g") and repeats ("7x1g") allowed.
- `mps`: one MPS daemon per instance; jobs go round-robin over the instances (several jobs may share one).
- `allow_destroy`: MIG instances already on the GPU may be destroyed when the layout does not fit beside them;
  they are recreated at their placements on exit.
- `dry_run`: print the equivalent `nvidia-smi` commands and change nothing; no jobs can run.

Entering needs root (or the MIG config capability) and an idle GPU; leaving restores the MIG mode and instances
found, also after an exception, Ctrl-C or a killed worker.

    >>> spec = ModeSpec("mig", {"layout": "3g,2g,1g,1g"})                              # doctest: +SKIP
    >>> with make_mode(spec, workdir=run_dir, gpu=0, device="cuda") as mode:         # doctest: +SKIP
    ...     [(s.env["CUDA_VISIBLE_DEVICES"][:8], s.info) for s in mode.slots(4)][0]
    ('MIG-4f1c', {'profile': '3g.40gb', 'placement': '4:4', 'gpu_instance': 2})
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_apply import MigLayout
from colloc_kit.gpu.mig_catalogue import GPU_MODELS, parse_layout
from colloc_kit.gpu.mps_daemon import MpsDaemon, find_control
from colloc_kit.modes.base import Option, SharingMode, Slot

__all__ = ["MigMode"]


class MigMode(SharingMode):
    """Jobs on MIG instances created for the run (hardware-isolated compute, memory and caches)."""

    name = "mig"
    takes = (
        Option("layout", str, "MIG profiles, one per job, e.g. 3g.40gb,2g.20gb,1g.10gb,1g.10gb", many=True,
               required=True),
        Option("mps", bool, "one MPS daemon per instance; jobs go round-robin over the instances"),
        Option("allow_destroy", bool, "MIG instances already on the GPU may be destroyed (recreated on exit)"),
        Option("dry_run", bool, "print the equivalent nvidia-smi commands, change nothing"),
    )

    def __init__(self, workdir: Path, gpu: int = 0, device: str = "cuda", **options: Any) -> None:
        super().__init__(workdir, gpu, device, **options)
        self.mig = MigLayout(options["layout"], gpu=gpu, allow_destroy=bool(options.get("allow_destroy")))
        self.daemons: list[MpsDaemon] = []
        self._stack: ExitStack | None = None

    @classmethod
    def validate_options(cls, options: dict, device: str) -> None:
        """Refuse a missing or unknown layout, a CPU run and non-boolean switches, before the GPU is read."""
        super().validate_options(options, device)
        if device != "cuda":
            raise BadInput(f"mode mig needs a MIG-capable CUDA GPU, but the jobs run on {device!r}")
        layout = options.get("layout")
        if not layout or not isinstance(layout, (str, list, tuple)):
            raise BadInput("mode mig needs a layout, e.g. layout: 3g.40gb,2g.20gb,1g.10gb,1g.10gb "
                           "(one profile per job)")
        errors = []
        for model in GPU_MODELS.values():  # the GPU is not read here: the names must exist on some MIG GPU
            try:
                parse_layout(layout, model)
                break
            except BadInput as exc:
                errors.append(str(exc))
        else:
            raise BadInput(f"mode mig: layout {layout!r} names a profile no MIG GPU has; {errors[0]}")
        for key in ("mps", "allow_destroy", "dry_run"):
            if not isinstance(options.get(key, False), bool):
                raise BadInput(f"mode mig: {key} is true or false, got {options[key]!r}")

    @classmethod
    def unavailable_here(cls, device: str = "cuda", gpu: int = 0) -> str | None:
        """Why not here: no CUDA GPU, a GPU that is not MIG-capable, or MIG mode disabled. Root (or the MIG
        capability) is needed too, and is checked when a run starts."""
        if device != "cuda":
            return f"needs a MIG-capable CUDA GPU; the jobs run on {device!r}"
        try:
            with nvml.session() as lib:
                if gpu >= lib.nvmlDeviceGetCount():
                    return f"GPU {gpu} does not exist"
                gpu_device = nvml.Device.at(lib, gpu)
                name, mig = gpu_device.name, gpu_device.read("nvmlDeviceGetMigMode")
        except nvml.NvmlUnavailable as exc:
            return str(exc)
        if mig.value is None:
            return f"GPU {gpu} ({name}) is not MIG-capable ({mig.reason}); planning and the simulator work anywhere"
        if not mig.value[0]:
            return (f"MIG mode is disabled on GPU {gpu} ({name}); an administrator enables it "
                    f"(nvidia-smi -i {gpu} -mig 1)")
        return None

    def check(self, n_jobs: int) -> None:
        """Plan on this GPU (read-only) and refuse a job count the layout cannot serve."""
        planned = self.mig.preflight()
        instances = len(planned.instances)
        if self.options.get("mps"):
            find_control()  # the MPS program must be there before MIG is touched
            return
        if n_jobs != instances:
            raise BadInput(f"mode mig: the layout has {instances} instances for {n_jobs} jobs; give one profile per "
                           f"job (layout {planned.layout()}), or set mps: true to share instances through MPS")

    def __enter__(self) -> "MigMode":
        self.mig.preflight()
        if self.options.get("dry_run"):
            print(f"mode mig, dry run on GPU {self.gpu}: nothing is changed. The equivalent commands:")
            print("\n".join(self.mig.commands()))
            return self
        if self.options.get("mps"):
            find_control()
        with ExitStack() as stack:
            stack.enter_context(self.mig)
            if self.options.get("mps"):
                for n, created in enumerate(self.mig.created):
                    self.daemons.append(stack.enter_context(MpsDaemon(created.uuid, self.workdir / f"mps-{n}")))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(*exc_info)  # MPS daemons quit first, then the MIG layout is undone

    def slots(self, n_jobs: int) -> list[Slot]:
        """One slot per job on the created instances, round-robin (with mps: through each instance's daemon)."""
        if self.options.get("dry_run"):
            raise BadInput("mode mig ran as a dry run: nothing was applied, so there are no MIG devices for jobs")
        created = self.mig.created
        if not created:
            raise RuntimeError("MigMode.slots() is called inside `with mode:`")
        slots = []
        for i in range(n_jobs):
            k = i % len(created)
            inst = created[k]
            env = self.daemons[k].client_env() if self.daemons else {"CUDA_VISIBLE_DEVICES": inst.uuid}
            info = {"profile": inst.placed.profile.name, "placement": f"{inst.placed.start}:{inst.placed.size}",
                    "gpu_instance": inst.gi_id}
            if self.daemons:
                info["mps"] = True
            slots.append(Slot(label=f"mig-{i} {inst.placed.label()}", env=env, info=info))
        return slots

    def state(self) -> dict[str, Any]:
        """The layout found, destroyed and created, each instance's placement and UUID, the MPS daemons."""
        mig = self.mig
        return {
            "name": self.name, "options": self.options,
            "gpu_model": mig.catalogue.name if mig.catalogue else None,
            "found": mig.before.describe() if mig.before else None,
            "destroyed_and_recreated": [f"{i.profile}@{i.start}" for i in mig.to_destroy],
            "instances": [{"profile": c.placed.profile.name, "placement": f"{c.placed.start}:{c.placed.size}",
                           "gpu_instance": c.gi_id, "compute_instance": c.ci_id, "uuid": c.uuid,
                           "sm_count": c.placed.profile.sm_count, "memory_mib": c.placed.profile.memory_mib}
                          for c in mig.created],
            "mps_daemons": [d.state() for d in self.daemons],
        }

    def problems(self) -> list[str]:
        """What applying or restoring the layout ran into, and any MPS server fault."""
        found = list(self.mig.problems)
        for daemon in self.daemons:
            fault = daemon.server_fault()
            if fault:
                found.append(f"MPS server fault on {daemon.device}: {fault}")
        return found

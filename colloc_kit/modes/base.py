"""The sharing-mode interface: a context manager that prepares the GPU and hands out one slot per job.

A mode never knows about notebooks or workers; a worker never knows about modes, it only sees its slot's
environment. Constructing a mode validates its options and changes nothing; `__enter__` changes the GPU;
`__exit__` restores what was there, on every exit path.

    >>> with make_mode(ModeSpec("naive"), workdir=run_dir, gpu=0, device="cuda") as mode:   # doctest: +SKIP
    ...     slots = mode.slots(4)
    ...     slots[0].env
    {'CUDA_VISIBLE_DEVICES': 'GPU-5d3f0c52-...'}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import nvml


@dataclass(frozen=True)
class Slot:
    """Where one job lands: environment variables for its process, a label, and what the slot grants.

    `info` is recorded with the job (columns `slot_<key>` in jobs.csv), e.g. {"thread_percentage": 14}.
    """

    label: str
    env: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


class SharingMode:
    """Base class of the sharing modes. Subclasses set `name`, and override what they change.

    `sequential` modes run their jobs one after another (the exclusive baseline); the others start all jobs
    together behind one barrier.
    """

    name = "base"
    sequential = False
    option_names: tuple[str, ...] = ()  # the options the mode takes (ModeSpec.options)

    def __init__(self, workdir: Path, gpu: int = 0, device: str = "cuda", **options: Any):
        self.workdir = Path(workdir)
        self.gpu = gpu
        self.device = device
        self.options = options

    @classmethod
    def validate_options(cls, options: dict, device: str) -> None:
        """Refuse bad options with BadInput, before anything is built or changed. Default: only `option_names`."""
        from ..errors import BadInput

        unknown = sorted(set(options) - set(cls.option_names))
        if unknown:
            valid = f"valid options: {', '.join(cls.option_names)}" if cls.option_names else "it takes none"
            raise BadInput(f"mode {cls.name}: unknown option(s) {', '.join(unknown)}; {valid}")

    @classmethod
    def alone(cls, n_jobs: int) -> bool:
        """Whether `n_jobs` jobs under this mode each have the device to themselves (a baseline run)."""
        return cls.sequential

    def check(self, n_jobs: int) -> None:
        """Refuse (BadInput) a job count this mode cannot place, before anything changes. Default: any count."""

    def __enter__(self) -> "SharingMode":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    def slots(self, n_jobs: int) -> list[Slot]:
        """One slot per job. Default: every job on the chosen GPU (or the CPU)."""
        return [Slot(label=f"{self.name}-{i}", env=self.base_env()) for i in range(n_jobs)]

    def base_env(self) -> dict[str, str]:
        """Environment every slot of this mode starts from: the chosen GPU only, by UUID (an index would name
        another GPU where CUDA_VISIBLE_DEVICES is already narrowed, e.g. by Slurm)."""
        return {"CUDA_VISIBLE_DEVICES": nvml.device_uuid(self.gpu)} if self.device == "cuda" else {}

    def state(self) -> dict[str, Any]:
        """The mode's actual state, for the manifest (what was set up, not what was asked)."""
        return {"name": self.name, "options": self.options}

    def problems(self) -> list[str]:
        """Problems the mode saw during the run (e.g. an MPS server fault); recorded on the failed jobs."""
        return []

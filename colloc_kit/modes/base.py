"""The sharing-mode interface: a context manager that prepares the GPU and hands out one slot per job.

A mode never knows about notebooks or workers; a worker never knows about modes, it only sees its slot's
environment. Constructing a mode validates its options and changes nothing; `__enter__` changes the GPU;
`__exit__` restores what was there, on every exit path.

A subclass that sets its own `name` registers itself (see `registry`): the CLI's flags, the YAML keys, the panel's
choices and `colloc-kit info` come from its `name`, its docstring's first line and its `takes` (one `Option` each).

    >>> class Capped(NaiveMode):                                                        # doctest: +SKIP
    ...     '''naive, with one hardware queue per job'''
    ...     name = "capped"
    ...     takes = (Option("max_connections", int, "CUDA_DEVICE_MAX_CONNECTIONS of every job"),)
    >>> with make_mode(ModeSpec("naive"), workdir=run_dir, gpu=0, device="cuda") as mode:   # doctest: +SKIP
    ...     slots = mode.slots(4)
    ...     slots[0].env
    {'CUDA_VISIBLE_DEVICES': 'GPU-5d3f0c52-...'}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.modes import registry

__all__ = ["Option", "SharingMode", "Slot", "TYPE_WORDS"]

TYPE_WORDS = {int: "a whole number", float: "a number", str: "a text", bool: "true or false"}  # the option types


@dataclass(frozen=True)
class Option:
    """One option a mode takes: its YAML key (`name`), its type, a help line, and whether it may be a list
    (`many`: one value per job, or a layout; on the command line comma-separated).

    >>> Option("thread_percentage", int, "active thread % per job", many=True).flag
    '--thread-percentage'
    """

    name: str
    type: type
    help: str
    many: bool = False
    required: bool = False

    def __post_init__(self) -> None:
        if self.type not in TYPE_WORDS:
            raise TypeError(f"option {self.name}: type must be one of int, float, str, bool, got {self.type!r}")

    @property
    def flag(self) -> str:
        """The command-line flag of this option."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Slot:
    """Where one job lands: environment variables for its process, a label, and what the slot grants.

    `info` is recorded with the job (columns `slot_<key>` in jobs.csv), e.g. {"thread_percentage": 14}.
    """

    label: str
    env: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


class SharingMode:
    """Base class of the sharing modes. Subclasses set `name` (which registers them), `takes` (their options), and
    override what they change.

    `sequential` modes run their jobs one after another (the exclusive baseline); the others start all jobs
    together behind one barrier.
    """

    name = "base"
    sequential = False
    takes: tuple[Option, ...] = ()  # the options the mode takes (ModeSpec.options), declared once
    option_names: tuple[str, ...] = ()  # derived from `takes`

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.option_names = tuple(option.name for option in cls.takes)
        if "name" in cls.__dict__:  # a building block without its own name (e.g. PlainCudaMode) is not a mode
            registry.register(cls)

    def __init__(self, workdir: Path, gpu: int = 0, device: str = "cuda", **options: Any):
        self.workdir = Path(workdir)
        self.gpu = gpu
        self.device = device
        self.options = options

    @classmethod
    def summary(cls) -> str:
        """The first line of the mode's docstring: what it does, in one line."""
        return (cls.__doc__ or cls.name).strip().splitlines()[0]

    @classmethod
    def validate_options(cls, options: dict, device: str) -> None:
        """Refuse bad options with BadInput, before anything is built or changed. Default: only the declared ones,
        each of its declared type (or a list of them where `many`), the required ones given."""
        unknown = sorted(set(options) - set(cls.option_names))
        if unknown:
            valid = f"valid options: {', '.join(cls.option_names)}" if cls.option_names else "it takes none"
            raise BadInput(f"mode {cls.name}: unknown option(s) {', '.join(unknown)}; {valid}")
        for option in cls.takes:
            value = options.get(option.name)
            if value is None:
                if option.required:
                    raise BadInput(f"mode {cls.name} needs a {option.name} ({option.help})")
                continue
            values = value if option.many and isinstance(value, (list, tuple)) else [value]
            wrong = [v for v in values if not _is_a(v, option.type)]
            if wrong:
                many = " (or a list of them)" if option.many else ""
                raise BadInput(f"mode {cls.name}: {option.name} is {TYPE_WORDS[option.type]}{many}, got {wrong[0]!r}")

    @classmethod
    def unavailable_here(cls, device: str = "cuda", gpu: int = 0) -> str | None:
        """Why this mode cannot run jobs on `device` (GPU `gpu`) of this machine, or None where it can. Reads only.

        >>> from colloc_kit.modes import NaiveMode
        >>> NaiveMode.unavailable_here(device="cpu") is None
        True
        """
        return None

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


def _is_a(value: Any, kind: type) -> bool:
    """`value` is of the option type `kind`; a bool is no number, an int is a float."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    return isinstance(value, (int, float) if kind is float else kind)

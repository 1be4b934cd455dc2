"""An experiment: job groups run under each sharing mode (`ModeSpec`), at each copy count, `repeats` times, and how
and where its cells run (GPUs, Slurm or another executor, placement on the host's cores, MLflow, warm repeats).

    >>> spec = ExperimentSpec(jobs=[JobSpec(model="resnet18")], modes=[ModeSpec("naive"), ModeSpec.parse("mps")],
    ...                       copies=[1, 2])
    >>> [(mode.label, copies, repeat) for mode, copies, repeat in spec.runs()]
    [('naive', 1, 0), ('naive', 2, 0), ('mps', 1, 0), ('mps', 2, 0)]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from colloc_kit.errors import BadInput
from colloc_kit.modes.registry import validate_mode_spec
from colloc_kit.spec.baselines import BaselineKeys
from colloc_kit.spec.checks import excerpt, is_int, is_positive_number, listed, require
from colloc_kit.spec.job import JobSpec

__all__ = ["ExperimentSpec", "MAX_JOBS_PER_RUN", "ModeSpec", "PLACEMENTS"]


PLACEMENTS = ("pinned", "unpinned")  # how jobs sit on the host's cores (ExperimentSpec.placement)
MAX_JOBS_PER_RUN = 48  # the most clients one MPS server takes on Volta and later; more would not start anyway


@dataclass(frozen=True)
class ModeSpec:
    """A sharing mode by name, with its options (e.g. MPS thread percentage, a MIG layout)."""

    name: str
    options: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any) -> "ModeSpec":
        """'naive', or {'name': 'mps', 'thread_percentage': 50} as in YAML."""
        if isinstance(value, ModeSpec):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping) and isinstance(value.get("name"), str):
            options = {k: v for k, v in value.items() if k != "name"}
            return cls(value["name"], options)
        raise BadInput(f"a mode is a name such as 'naive' or a mapping with 'name' and options, got {excerpt(value)}; "
                       "write e.g. {name: mps, thread_percentage: 50}")

    @property
    def label(self) -> str:
        """A short human label, e.g. 'mps(thread_percentage=50)'."""
        if not self.options:
            return self.name
        inner = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.options.items()))
        return f"{self.name}({inner})"


@dataclass(frozen=True)
class ExperimentSpec(BaselineKeys):
    """Job groups run under each mode, at each copy count, `repeats` times. One run per (mode, copies, repeat)."""

    jobs: list[JobSpec]
    modes: list[ModeSpec] = field(default_factory=lambda: [ModeSpec("naive")])
    copies: list[int] = field(default_factory=lambda: [1])
    repeats: int = 1
    name: str = "experiment"
    gpu: int = 0
    time_limit_s: float | None = None
    monitor: bool = True
    monitor_interval_s: float = 0.15
    gpus: list[int] | str | None = None  # cells dispatched over these GPUs, one cell per GPU at a time; "all"
    slurm: dict | None = None  # submit one Slurm array task per cell with these options (see slurm.OPTIONS)
    executor: dict | None = None  # {name: an executor, its options...}: any executor, a plug-in's too (executors/)
    placement: str = "pinned"  # pinned: each job its own block of cores; unpinned: as the OS schedules (the study)
    mlflow: str | None = None  # also log each cell, as it completes, to this MLflow tracking URI (mlflow_log.py)
    warm_repeats: bool = False  # a cell's repeats as consecutive windows of one launch of its jobs (pipeline/warm.py)
    feed_swaps: bool = False  # with warm_repeats: a GPU-only twin measured on its cell's launch, its feed swapped
    cell_precision: float | None = None  # a collocated cell repeats while its images/s CI half-width / mean is wider
    # (a mix: any one workload's images/s, pipeline/precision.py)
    cell_max_repeats: int | None = None  # the most runs of one collocated cell with cell_precision (None: repeats)

    def __post_init__(self) -> None:
        super().__post_init__()  # baselines, baseline_precision, baseline_max_repeats (`baselines`)
        require(len(self.jobs) > 0, "an experiment needs at least one job")
        require(len(self.modes) > 0,
                "an experiment needs at least one mode; give e.g. --mode naive (YAML: modes: [naive])")
        twice = sorted({m.label for m in self.modes if self.modes.count(m) > 1})
        require(not twice, f"modes lists {', '.join(twice)} more than once; name each mode once")
        require(len(self.copies) > 0 and all(is_int(c) and c > 0 for c in self.copies),
                f"copies must be whole numbers of at least 1, such as [1, 2, 4]; got {excerpt(self.copies)}")
        most = max(self.copies) * len(self.jobs)
        require(most <= MAX_JOBS_PER_RUN, f"{max(self.copies)} copies of {len(self.jobs)} job group(s) make {most} "
                                           f"jobs in one run; a run starts at most {MAX_JOBS_PER_RUN}: lower --copies")
        require(is_int(self.repeats) and self.repeats > 0,
                f"repeats must be a positive integer, got {excerpt(self.repeats)}")
        require(is_int(self.gpu) and self.gpu >= 0, f"gpu must be a GPU index >= 0, got {excerpt(self.gpu)}")
        require(isinstance(self.name, str) and self.name.strip(". ") and not set(self.name) & set("/\\\0"),
                f"name must be a folder name without / or \\ (e.g. resnet-study), got {excerpt(self.name)}")
        if self.time_limit_s is not None:
            require(is_positive_number(self.time_limit_s),
                    f"time_limit_s must be a positive number of seconds, got {excerpt(self.time_limit_s)}")
        require(self.placement in PLACEMENTS,
                f"placement must be one of {', '.join(PLACEMENTS)}, got {excerpt(self.placement)}")
        require(isinstance(self.monitor, bool), f"monitor must be true or false, got {excerpt(self.monitor)}")
        require(isinstance(self.warm_repeats, bool),
                f"warm_repeats must be true or false, got {excerpt(self.warm_repeats)}")
        require(isinstance(self.feed_swaps, bool), f"feed_swaps must be true or false, got {excerpt(self.feed_swaps)}")
        require(self.warm_repeats or not self.feed_swaps,
                "feed_swaps swaps the feed of a launch kept between windows: give it with warm_repeats")
        if self.cell_precision is not None:
            require(is_positive_number(self.cell_precision) and self.cell_precision < 1,
                    f"cell_precision is a target CI half-width as a share of a cell's mean images/s, e.g. 0.04; "
                    f"got {excerpt(self.cell_precision)}")
        if self.cell_max_repeats is not None:
            require(is_int(self.cell_max_repeats) and self.cell_max_repeats > 0,
                    f"cell_max_repeats is a positive number of runs, got {excerpt(self.cell_max_repeats)}")
        require(is_positive_number(self.monitor_interval_s),
                f"monitor_interval_s must be a positive number of seconds, got {excerpt(self.monitor_interval_s)}")
        if self.gpus is not None:
            require(self.gpus == "all" or (isinstance(self.gpus, list) and self.gpus
                                            and all(is_int(g) and g >= 0 for g in self.gpus)),
                    f"gpus is 'all' or a list of GPU indices such as [0, 1], got {excerpt(self.gpus)}")
            require(self.gpus == "all" or len(set(self.gpus)) == len(self.gpus),
                    f"gpus lists a GPU twice ({self.gpus}); a GPU runs one cell at a time: name each once")
        if self.slurm is not None:  # its options are the Slurm executor's to check (pipeline/executors/slurm.py)
            require(self.gpus is None, "give gpus or slurm, not both: Slurm hands each cell its own GPU")
        if self.mlflow is not None:
            require(isinstance(self.mlflow, str) and self.mlflow.strip(),
                    f"mlflow is a tracking URI such as http://127.0.0.1:5000, got {excerpt(self.mlflow)}")
            require("@" not in urlsplit(self.mlflow).netloc, "mlflow: the tracking URI is recorded with the runs; "
                    "leave credentials out of it and set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
        devices = {j.device for j in self.jobs}
        require(len(devices) == 1, f"all jobs of an experiment run on one device kind, got {sorted(devices)}")
        for mode in self.modes:
            validate_mode_spec(mode, device=self.device)

    @property
    def device(self) -> str:
        """The device of the experiment's jobs (the first job's: all jobs of a spec share it)."""
        return self.jobs[0].device

    def runs(self) -> list[tuple[ModeSpec, int, int]]:
        """Every run as (mode, copies, repeat), repeats innermost-last so that repeats are spread over time."""
        return [(m, c, r) for r in range(self.repeats) for m in self.modes for c in self.copies]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "ExperimentSpec":
        """Build from a YAML-like dict (see the module's example)."""
        require(isinstance(data, Mapping), f"a spec is a mapping of keys, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = listed(set(data) - known)
        require(not unknown, f"spec: unknown key(s) {unknown}; valid keys: {', '.join(sorted(known))}")
        groups: Any = data.get("jobs")
        require(isinstance(groups, list) and groups, "spec: 'jobs' must be a non-empty list of job groups")
        jobs = []
        for i, group in enumerate(groups):
            require(isinstance(group, Mapping), f"spec: jobs[{i}] must be a mapping such as {{model: resnet18}}")
            jobs.append(JobSpec.from_mapping(group, where=f"jobs[{i}]"))
        modes = data.get("modes", ["naive"])
        modes = [modes] if isinstance(modes, (str, Mapping)) else modes
        require(isinstance(modes, list), "spec: 'modes' must be a list")
        copies = data.get("copies", [1])
        copies = [copies] if is_int(copies) else copies
        require(isinstance(copies, list), f"spec: 'copies' must be a whole number of copies or a list of them, such as "
                                          f"[1, 2, 4]; got {excerpt(copies)}")
        rest = {k: v for k, v in data.items() if k not in ("jobs", "modes", "copies")}
        try:
            return cls(jobs=jobs, modes=[ModeSpec.parse(m) for m in modes], copies=copies, **rest)
        except TypeError as exc:
            raise BadInput(f"spec: {exc}") from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ExperimentSpec":
        """An ExperimentSpec read from a YAML file (safe YAML: `yaml_files`), checked as `from_mapping` does."""
        from colloc_kit.spec.yaml_files import read_yaml  # noqa: PLC0415 - PyYAML loads only when a spec file is read
        return cls.from_mapping(read_yaml(path))

    def to_dict(self) -> dict:
        """Plain data for the manifest (and a YAML file that `from_mapping` reads back)."""
        data = dataclasses.asdict(self)
        data["jobs"] = [j.to_dict() for j in self.jobs]
        data["modes"] = [{"name": m.name, **m.options} for m in self.modes]
        return data


def _short(value: Any) -> str:
    return "+".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)

"""Where cells run: one registry of executors, by name. Built in: `here` (this process, one GPU), `gpus` (several
GPUs of this host, a process per cell), `slurm` (an array task per cell). A spec picks one by its keys: `executor:
{name: NAME, <option>: ...}` names any executor with the options its `Options` dataclass declares (types checked from
its type hints, `base.options_from`); `slurm:` and `gpus:` still name those two; else here. `run_spec(spec,
executor=NAME)` names one too. A plug-in executor is `register`ed, or declared by an installed package as an entry
point of the group `colloc_kit.executors` (`[project.entry-points."colloc_kit.executors"] lab = "mylab.run:Lab"`),
as modes are (`colloc_kit.modes`). The interface (`Executor`, `CellJob`, options) is in `base`, each built-in executor
in a module of its name, and the lanes and queue that `gpus` hands its cells to in `dispatcher`.

    >>> sorted(names())
    ['gpus', 'here', 'slurm']
    >>> executor_class("nowhere")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: executor 'nowhere' is not known; known: gpus, here, slurm (a plug-in: ...)
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.modes.registry import guarded
from colloc_kit.pipeline.executors.base import CellJob, Executor, FinishedCell, NoOptions, options_from
from colloc_kit.pipeline.executors.gpus import GpusExecutor
from colloc_kit.pipeline.executors.here import HereExecutor
from colloc_kit.pipeline.executors.slurm import SlurmExecutor, SlurmOptions
from colloc_kit.spec import ExperimentSpec

__all__ = ["CellJob", "Executor", "FinishedCell", "GpusExecutor", "HereExecutor", "NoOptions", "SlurmExecutor",
           "ENTRY_POINTS", "SlurmOptions", "chosen", "executor_class", "names", "options_from", "register"]

ENTRY_POINTS = "colloc_kit.executors"  # the entry-point group of installed packages' executors
_REGISTRY: dict[str, type[Executor]] = {}


def register(kind: type[Executor]) -> type[Executor]:
    """Make `kind` (an Executor subclass with a `name`) known by its name; usable as a class decorator."""
    if not (isinstance(kind, type) and issubclass(kind, Executor) and isinstance(getattr(kind, "name", None), str)
            and kind.name.isidentifier()):
        raise BadInput(f"an executor is a subclass of colloc_kit.pipeline.executors.Executor with a `name` that is a "
                       f"word, got {kind!r}")
    _REGISTRY[kind.name] = kind
    return kind


def names() -> list[str]:
    """The names of the executors known now, the installed packages' entry points included."""
    return list(dict.fromkeys([*_REGISTRY, *(p.name for p in importlib.metadata.entry_points(group=ENTRY_POINTS))]))


def executor_class(name: str) -> type[Executor]:
    """The executor registered as `name`, or declared by an installed package's entry point of that name (loaded and
    registered on first use); BadInput naming the known ones."""
    if name not in _REGISTRY:
        for point in importlib.metadata.entry_points(group=ENTRY_POINTS, name=name):
            register(guarded(f"the entry point {point.name} = {point.value} ({ENTRY_POINTS})", point.load,
                             "fix its package, or uninstall it"))
    if name not in _REGISTRY:
        raise BadInput(f"executor {name!r} is not known; known: {', '.join(sorted(names()))} "
                       f"(a plug-in: executors.register, or an entry point of {ENTRY_POINTS})")
    return _REGISTRY[name]


def chosen(spec: ExperimentSpec, name: str | None = None) -> tuple[type[Executor], Any]:
    """The executor class for `spec` and its options: `name` where given, else by the spec's keys (`executor:` ->
    the executor it names with its other keys as options, `slurm:` -> slurm with those options, `gpus:` -> gpus,
    else here)."""
    if spec.executor is not None and not (isinstance(spec.executor, dict) and isinstance(spec.executor.get("name"), str)
                                          and spec.slurm is None and spec.gpus is None):
        raise BadInput(f"executor is {{name: <executor>, <option>: ...}} (no slurm, no gpus), got {spec.executor!r}")
    given = {k: v for k, v in (spec.executor or {}).items() if k != "name"}
    if name is not None:
        named = (spec.executor or {}).get("name")
        return executor_class(name), given if name == named else spec.slurm if name == SlurmExecutor.name else None
    if spec.executor is not None:
        return executor_class(spec.executor["name"]), given
    if spec.slurm is not None:
        return SlurmExecutor, spec.slurm
    return (GpusExecutor if spec.gpus is not None else HereExecutor), None


for _builtin in (HereExecutor, GpusExecutor, SlurmExecutor):
    register(_builtin)

"""What an executor is: the one interface behind which cells run, here, on several GPUs, in Slurm or anywhere a
plug-in sends them, in the way submitit splits an `Executor` (one abstract submission hook) from a `Job` handle
(`result()`, `done()`, `cancel()`).

An executor is built for one experiment (`Executor(spec, folder, options)`): `check()` refuses what it cannot run
before anything starts (BadInput), `in_flight()` names the cells it has under way elsewhere (a Slurm queue), and
`submit(cells)` hands it the cells to run, returning one `CellJob` per cell. Its options are its own typed dataclass
(`Options`), built from the spec's mapping by `options_from`. A fourth executor is one file:

    >>> from dataclasses import dataclass
    >>> class Inline(Executor):
    ...     name = "inline"
    ...     def _submit(self, cells, spec_file):
    ...         return [FinishedCell(cell, "complete") for cell in cells]
    >>> executors.register(Inline)                                # doctest: +SKIP
    >>> colloc_kit.run_spec(spec, executor="inline")              # doctest: +SKIP
"""

from __future__ import annotations

import abc
import collections.abc
import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from colloc_kit.analysis.results import RunReading
from colloc_kit.errors import BadInput, BrokenPlugin
from colloc_kit.pipeline.cells import Cell
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import Status
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["CellJob", "Executor", "FinishedCell", "NoOptions", "options_from"]


@dataclass(frozen=True)
class NoOptions:
    """The options of an executor that takes none."""


def options_from(kind: type, given: Mapping[str, Any] | None, where: str) -> Any:
    """`kind` (an options dataclass) from a mapping, each value checked against its field's type hint (`int`: a
    positive whole number, `str`: a non-empty name, `float`: a number, `bool`: true or false, `list[X]`: a list of X,
    a union: any of its types; None leaves the default); BadInput naming `where` otherwise.

    >>> @dataclass(frozen=True)
    ... class Opts:
    ...     queue: str | None = None
    ...     minutes: int = 60
    ...     cpus: list[int] | None = None
    >>> options_from(Opts, {"minutes": 30, "cpus": [8, 16]}, "demo")
    Opts(queue=None, minutes=30, cpus=[8, 16])
    >>> options_from(Opts, {"minutes": -1}, "demo")
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: demo: minutes must be a positive whole number, got -1
    >>> options_from(Opts, {"cpus": [8, "a"]}, "demo")
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: demo: cpus must be a list of positive whole numbers, got [8, 'a']
    """
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise BadInput(f"{where}: give a mapping of options such as {{partition: gpu, time_min: 30}}, got {given!r}")
    known = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise BadInput(f"{where}: unknown option(s) {', '.join(map(str, unknown))}; valid options: {', '.join(known)}")
    try:
        hints = typing.get_type_hints(kind)
    except Exception as exc:  # a name in an annotation that its module does not define
        raise BrokenPlugin(f"{where}: the options {kind.__qualname__} have a type hint that does not resolve "
                           f"({type(exc).__name__}: {exc}); import the names their annotations use") from None
    for key, value in given.items():
        if value is not None and not _fits(hints.get(key, Any), value):
            raise BadInput(f"{where}: {key} must be {_wanted(hints[key])}, got {value!r}")
    return kind(**{k: v for k, v in given.items() if v is not None})


def _fits(hint: Any, value: Any) -> bool:
    """Whether `value` (read from YAML or given in Python) is of the type `hint` says (see `options_from`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(arg, value) for arg in args if arg is not type(None))
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence):
        return isinstance(value, (list, tuple)) and all(_fits(args[0] if args else Any, item) for item in value)
    if origin in (dict, collections.abc.Mapping):
        return isinstance(value, Mapping)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str) and bool(value)
    return True  # Any, or a type YAML does not make: the executor checks it in `check()`


def _wanted(hint: Any) -> str:
    """What `hint` asks for, in words."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_wanted(arg) for arg in args if arg is not type(None))
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence):
        inner = _wanted(args[0]) if args else "anything"
        return "a list of " + (inner.replace("a ", "", 1) + "s" if inner.startswith("a ") else inner)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    words = {bool: "true or false", int: "a positive whole number", float: "a number", str: "a name"}
    return words.get(hint, "a mapping" if origin in (dict, collections.abc.Mapping) else str(hint))


class CellJob(abc.ABC):
    """The handle of one submitted cell (submitit's `Job`): whether it is done, its result, a way to cancel it."""

    def __init__(self, cell: Cell):
        self.cell = cell

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether the cell has ended (complete or not)."""

    @abc.abstractmethod
    def result(self) -> Status | str:
        """The cell run's status, waiting for it to end if need be."""

    def cancel(self) -> None:  # noqa: B027 - a default: nothing to stop unless an executor says otherwise
        """Stop the cell if it has not ended (nothing to do for a cell that already ended)."""

    def reading(self) -> RunReading | None:
        """The run as it ended, where the executor read it back in this process (else the folder has it)."""
        return None


class FinishedCell(CellJob):
    """A cell that ran to its end before `submit` returned (as the executors of this host run them)."""

    def __init__(self, cell: Cell, status: Status | str, reading: RunReading | None = None):
        super().__init__(cell)
        self._status, self._reading = status, reading

    def done(self) -> bool:
        """Always: it ran before `submit` returned."""
        return True

    def result(self) -> Status | str:
        """The status its run ended with."""
        return self._status

    def reading(self) -> RunReading | None:
        """The run as read back when it ended (None where it ran in another process)."""
        return self._reading


class Executor(abc.ABC):
    """Runs an experiment's cells somewhere (see the module). Subclasses set `name`, `Options` if they take any, and
    implement `_submit`; `check`, `in_flight` and `settle` have defaults that refuse nothing, know of nothing in flight
    and keep nothing."""

    name: ClassVar[str]
    Options: ClassVar[type] = NoOptions

    def __init__(self, spec: ExperimentSpec, folder: ExperimentFolder, options: Any = None, progress: Any = True):
        """`options`: an `Options` or a mapping of its fields; `progress`: show progress (True, False, or a
        `progress.Progress` to report to)."""
        self.spec, self.folder, self.progress = spec, folder, progress
        self.options = options if isinstance(options, self.Options) else options_from(self.Options, options,
                                                                                         self.name)

    def check(self) -> None:  # noqa: B027 - a default: nothing to refuse unless an executor says otherwise
        """Refuse (BadInput) what this executor cannot run, before anything starts: jobs, modes, GPUs, tools."""

    def in_flight(self) -> set[str]:
        """Ids of the cells this executor has under way outside this process (not run again meanwhile)."""
        return set()

    def settle(self) -> None:  # noqa: B027 - a default: nothing kept unless an executor says otherwise
        """The experiment's cells have all ended: let go of what was kept for them (a warm launch)."""

    def submit(self, cells: list[Cell]) -> list[CellJob]:
        """Run (or queue) `cells` with the spec stored in the folder; one handle per cell, in order."""
        return self._submit(cells, self.folder.write_spec(self.spec))

    @abc.abstractmethod
    def _submit(self, cells: list[Cell], spec_file: Path) -> list[CellJob]:
        """The submission hook: run or queue `cells` (the spec is in `spec_file`; `cells` may be empty), return their
        handles."""

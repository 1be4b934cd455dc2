"""The cells of an experiment, and the plan of which to run: the unit that is run, skipped, dispatched, resumed.

A cell is one (mode, copies, repeat) of a spec, in the order `ExperimentSpec.runs()` gives (repeats interleaved,
A B A B). Its id is stable: the mode's label, the copies, the repeat and a fingerprint of the jobs and their placement
on the host's cores, so the same command into the same folder finds the cells it already ran, and a changed job (steps,
batch size) or placement (a pinned run never counts for an unpinned cell) makes new ones.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=20)], copies=[1, 2])
    >>> [c.cell_id for c in cells(spec)]                                    # doctest: +ELLIPSIS
    ['naive-x1-r0-...', 'naive-x2-r0-...']
    >>> import tempfile
    >>> [c.label for c in Plan.of(spec, ExperimentFolder.of(tempfile.mkdtemp(), "x")).todo]
    ['naive-x1-r0', 'naive-x2-r0']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import AbstractSet

from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.statuses import COMPLETE, RUNNING
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import safe_name

__all__ = ["Cell", "Plan", "cells", "jobs_fingerprint"]


@dataclass(frozen=True)
class Cell:
    """One run of an experiment: its mode, copy count and repeat, and the id that names it in every manifest."""

    mode: ModeSpec
    copies: int
    repeat: int
    cell_id: str

    @property
    def label(self) -> str:
        """The cell as people read it: `<mode label>-x<copies>-r<repeat>` (its run folders end with it)."""
        return f"{self.mode.label}-x{self.copies}-r{self.repeat}"


def jobs_fingerprint(spec: ExperimentSpec) -> str:
    """Ten hex digits that change whenever anything a job does changes (model, budget, batch size, ...) or where it
    sits on the host (`placement`)."""
    text = json.dumps({"jobs": [_fingerprinted(job) for job in spec.jobs], "placement": spec.placement},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# JobSpec fields added after cell ids were first made: left out while at their defaults, so a folder's cells keep
# their ids across kit versions (a run made before them is found complete, not run again)
LATER_FIELDS = ("cudnn_autotune", "role", "rate_per_s", "concurrency", "max_batch", "max_delay_ms", "slo")


def _fingerprinted(job: JobSpec) -> dict:
    defaults = {f.name: f.default for f in dataclasses.fields(JobSpec)}
    return {k: v for k, v in job.to_dict().items() if not (k in LATER_FIELDS and v == defaults[k])}


def cells(spec: ExperimentSpec) -> list[Cell]:
    """Every cell of `spec`, in run order."""
    fingerprint = jobs_fingerprint(spec)
    return [Cell(mode, copies, repeat, f"{safe_name(mode.label)}-x{copies}-r{repeat}-{fingerprint}")
            for mode, copies, repeat in spec.runs()]


@dataclass(frozen=True)
class Plan:
    """What to do with each cell of a spec, given its folder: run it (`todo`), or skip it because it is complete,
    being run by a live process, or in flight elsewhere (queued in Slurm: `in_flight`, from the executor)."""

    all: list[Cell]
    todo: list[Cell]
    done: list[Cell] = field(default_factory=list)
    running: list[Cell] = field(default_factory=list)
    queued: list[Cell] = field(default_factory=list)

    @classmethod
    def of(cls, spec: ExperimentSpec, folder: ExperimentFolder, in_flight: AbstractSet[str] = frozenset()) -> "Plan":
        """The plan for `spec` in `folder`; `in_flight`: ids of cells an executor has under way elsewhere."""
        every, states = cells(spec), folder.cell_states()
        status = {c.cell_id: states[c.cell_id].status for c in every if c.cell_id in states}
        done = [c for c in every if status.get(c.cell_id) == COMPLETE]
        running = [c for c in every if status.get(c.cell_id) == RUNNING]
        queued = [c for c in every if c.cell_id in in_flight and c not in running and c not in done]
        todo = [c for c in every if c not in done and c not in running and c not in queued]
        return cls(every, todo, done, running, queued)

    def say_skipped(self, folder: ExperimentFolder) -> None:
        """Name on stderr the cells not run again, and why."""
        for skipped, why in ((self.done, "already complete"), (self.running, "being run by another process"),
                             (self.queued, "queued in Slurm")):
            if skipped:
                print(f"colloc-kit: {len(skipped)} cell(s) {why} in {folder.path}, not run again: "
                      + ", ".join(c.label for c in skipped), file=sys.stderr)

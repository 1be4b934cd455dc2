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
import re
import sys
from dataclasses import dataclass, field
from typing import AbstractSet

from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.statuses import COMPLETE, RUNNING
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import safe_name
from colloc_kit.worker.datasets import image_side

__all__ = ["EXCLUSIVE", "Cell", "Plan", "alone_jobs", "baseline_cells", "cell_named", "cells", "collocated",
           "jobs_fingerprint", "lone_mode", "series_most", "warm_launches", "warm_order"]

EXCLUSIVE = ModeSpec("exclusive")  # how a baseline's lone cell runs where the spec has no lone mode


@dataclass(frozen=True)
class Cell:
    """One run of an experiment: its mode, copy count and repeat, and the id that names it in every manifest."""

    mode: ModeSpec
    copies: int
    repeat: int
    cell_id: str
    jobs: tuple[JobSpec, ...] | None = None  # a baseline cell's own jobs (more workers, synthetic data); None: spec's
    baseline: str | None = None  # host-matched or gpu-only for such a cell (`spec.baselines`)
    feed_from: str | None = None  # with feed swaps: the series whose kept launch this twin takes, its feed swapped
    job_model: str | None = None  # a lone cell of one job of a mix: that job's model (`alone_jobs`), in its label

    @property
    def label(self) -> str:
        """The cell as people read it: `<mode label>-x<copies>-r<repeat>` (its run folders end with it), after
        `host-matched-w<workers>-` or `gpu-only-` for a baseline's cell, and the model for a lone cell of one job of a
        mix (`job_model`)."""
        kind = f"{self.baseline}-w{self.jobs[0].workers}-" if self.baseline == "host-matched" and self.jobs else \
            f"{self.baseline}-" if self.baseline else ""
        model = f"{self.job_model}-" if self.job_model else ""
        return f"{kind}{model}{self.mode.label}-x{self.copies}-r{self.repeat}"

    @property
    def series(self) -> str:
        """The cell's id without its repeat: what its repeats share (a warm repeat's launch serves one series)."""
        return self.cell_id.replace(f"-r{self.repeat}-", "-")

    def spec_of(self, spec: ExperimentSpec) -> ExperimentSpec:
        """The spec this cell runs: `spec` with the cell's own jobs where it has them."""
        return spec if self.jobs is None else dataclasses.replace(spec, jobs=list(self.jobs))


def jobs_fingerprint(spec: ExperimentSpec, feed_swap: bool = False) -> str:
    """Ten hex digits that change whenever anything a job does changes (model, budget, batch size, ...), where it
    sits on the host (`placement`) or how its repeats are launched (`warm_repeats`: windows of one launch, never taken
    for cold repeats; `feed_swap`: a twin measured on its cell's launch, never taken for one launched afresh; each
    left out while off, so other cells keep their ids)."""
    warm = {"warm_repeats": True} if spec.warm_repeats else {}
    swap = {"feed_swap": True} if feed_swap else {}
    text = json.dumps({"jobs": [_fingerprinted(job) for job in spec.jobs], "placement": spec.placement, **warm,
                       **swap}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# JobSpec fields added after cell ids were first made: left out while at their defaults, so a folder's cells keep
# their ids across kit versions (a run made before them is found complete, not run again)
LATER_FIELDS = ("cudnn_autotune", "role", "rate_per_s", "concurrency", "max_batch", "max_delay_ms", "slo")


def _fingerprinted(job: JobSpec) -> dict:
    defaults = {f.name: f.default for f in dataclasses.fields(JobSpec)}
    return {k: v for k, v in job.to_dict().items() if not (k in LATER_FIELDS and v == defaults[k])}


def cells(spec: ExperimentSpec) -> list[Cell]:
    """Every cell of `spec`, in run order: each repeat's cells, then that repeat's baseline cells (`baseline_cells`);
    then the further repeats of the lone baseline cells, up to `baseline_max_repeats`, and of the collocated cells, up
    to `cell_max_repeats` with a `cell_precision`, which `Plan.of` runs only while their series misses its precision
    target (`pipeline.precision`).

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], copies=[1, 2], cell_precision=0.04, cell_max_repeats=2)
    >>> [c.label for c in cells(spec)]
    ['naive-x1-r0', 'naive-x2-r0', 'naive-x2-r1']
    """
    cell_most, lone_most = series_most(spec, collocated=True), series_most(spec, collocated=False)
    out: list[Cell] = []
    for repeat in range(max(cell_most, lone_most)):
        if repeat < spec.repeats:
            out += [_cell(spec, mode, copies, repeat) for mode in spec.modes for copies in spec.copies]
        elif repeat < cell_most:
            out += [_cell(spec, mode, copies, repeat) for mode in spec.modes for copies in spec.copies
                    if collocated(spec, mode, copies)]
        out += [c for c in baseline_cells(spec, repeat)
                if repeat < spec.repeats or (c.copies == 1 and repeat < lone_most)]
    return out


def series_most(spec: ExperimentSpec, collocated: bool) -> int:
    """The most runs a series of `spec` may have, its precision repeats past `repeats` included: a series of the
    spec's jobs sharing the GPU (`collocated`) up to `cell_max_repeats` where the spec gives a `cell_precision`, a lone
    baseline's up to `baseline_max_repeats`; never fewer than `repeats`.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], repeats=2, cell_precision=0.04, cell_max_repeats=5)
    >>> series_most(spec, collocated=True), series_most(spec, collocated=False)
    (5, 2)
    """
    if collocated:
        most = spec.cell_max_repeats if spec.cell_precision is not None else None
    else:
        most = spec.baseline_max_repeats
    return max(spec.repeats, most or 0)


def collocated(spec: ExperimentSpec, mode: ModeSpec, copies: int) -> bool:
    """Whether a cell of `spec`'s own jobs in `mode` shares the GPU between jobs (exclusive runs them one by one).

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")])
    >>> collocated(spec, ModeSpec("naive"), 2), collocated(spec, ModeSpec("naive"), 1), collocated(spec, EXCLUSIVE, 2)
    (True, False, False)
    """
    return mode.name != EXCLUSIVE.name and copies * len(spec.jobs) > 1


def baseline_cells(spec: ExperimentSpec, repeat: int) -> list[Cell]:
    """The cells the spec's `baselines` add to one repeat (docs/attribution.md): `configured`, one job alone as
    configured where the spec has no such cell; `host-matched`, one job alone with the loader workers of each
    collocated cell's jobs together (a mix: each of its jobs alone with the whole cell's); `gpu-only`, the spec's
    jobs on device-resident synthetic data at the same image size, alone and in every mode and copies (with
    `feed_swaps`, each on the launch of its cell of the spec's jobs, `Cell.feed_from`). A lone cell is `exclusive` x1,
    or the spec's own lone mode; a mix's lone cells run one job each (`alone_jobs`). Repeats past `repeats`: lone
    cells only, each continuing a series of the planned repeats (with `feed_swaps`, a lone twin swapped there but with
    no cell to swap from here would be a series of its own, which precision would start from nothing: left out)."""
    lone, extra = lone_mode(spec), repeat >= spec.repeats
    alone: list[list[JobSpec] | None] = [[job] for job in alone_jobs(spec)] or [None]  # each lone cell's jobs
    out = []
    fed = {(m.label, c) for m in spec.modes for c in spec.copies} if not extra else set()  # cells of the spec's jobs
    if "configured" in spec.baselines and (lone is None or extra):
        out += [_cell(spec, lone or EXCLUSIVE, 1, repeat, jobs) for jobs in alone]
        fed.add(((lone or EXCLUSIVE).label, 1))
    if "host-matched" in spec.baselines:
        for copies in sorted({c for c in spec.copies if c * len(spec.jobs) > 1}):
            more = copies * sum(job.workers for job in spec.jobs)
            out += [_cell(spec, EXCLUSIVE, 1, repeat, [job.with_(workers=more) for job in jobs or spec.jobs],
                          "host-matched") for jobs in alone]
    if "gpu-only" in spec.baselines:
        def twins(jobs: list[JobSpec]) -> list[JobSpec]:
            return [job.with_(dataset="synthetic", data_root=None,
                              image_size=image_side(job.dataset, job.image_size, job.model, job.device))
                    for job in jobs]

        runs = [(lone or EXCLUSIVE, 1, jobs) for jobs in alone] + [(m, c, None) for m in spec.modes
                                                                  for c in spec.copies if (m, c) != (lone, 1)]
        if extra:  # lone twins only, each continuing a planned series (a swapped twin needs its cell here: `fed`)
            runs = [(m, c, jobs) for m, c, jobs in runs if c == 1 and (not spec.feed_swaps or (m.label, c) in fed)]
        out += [_cell(spec, mode, copies, repeat, twins(jobs or spec.jobs), "gpu-only",
                      _cell(spec, mode, copies, repeat, jobs).series if spec.feed_swaps and (mode.label, copies) in fed
                      else None)
                for mode, copies, jobs in runs]
    return out


def alone_jobs(spec: ExperimentSpec) -> list[JobSpec]:
    """The jobs a mix's lone baselines run one cell each (none for a spec of one job, or one with its own lone cell):
    each distinct job once, with the default seed (a copy's seed sets its initial weights and data order, not its
    rate), so that every mix with a job shares its lone cells, and a lone cell of one job is warm like any other
    (a sequential cell of several jobs starts each afresh, `pipeline.cell`).

    >>> from colloc_kit.spec import JobSpec
    >>> mix = ExperimentSpec(jobs=[JobSpec(model="smallcnn", seed=1), JobSpec(model="tinynet"),
    ...                            JobSpec(model="smallcnn", seed=2)], modes=[ModeSpec("mps")])
    >>> [(job.model, job.seed) for job in alone_jobs(mix)]
    [('smallcnn', 0), ('tinynet', 0)]
    """
    if len(spec.jobs) < 2 or lone_mode(spec) is not None:
        return []
    seed = JobSpec.__dataclass_fields__["seed"].default
    return list(dict.fromkeys(job.with_(seed=seed) for job in spec.jobs))


def warm_order(cells: list[Cell]) -> list[Cell]:
    """`cells` with each cell's repeats after each other (warm repeats: one launch measures them all), a twin's
    (`Cell.feed_from`) after those of the series it swaps from, the series of more copies first, else in their order.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], copies=[1, 3], repeats=2, warm_repeats=True,
    ...                       baselines=["gpu-only"], feed_swaps=True)
    >>> [c.label for c in warm_order(cells(spec))]                          # doctest: +NORMALIZE_WHITESPACE
    ['naive-x3-r0', 'naive-x3-r1', 'gpu-only-naive-x3-r0', 'gpu-only-naive-x3-r1',
     'naive-x1-r0', 'naive-x1-r1', 'gpu-only-naive-x1-r0', 'gpu-only-naive-x1-r1']
    """
    first: dict[str, int] = {}
    for index, cell in enumerate(cells):
        first.setdefault(cell.series, index)
    return sorted(cells, key=lambda cell: (-cell.copies, first.get(cell.feed_from or "", first[cell.series]),
                                           cell.feed_from in first, cell.repeat))


def warm_launches(cells: list[Cell]) -> int:
    """The launches warm repeats make of `cells`, run in `warm_order` on one lane: one per series, less one per twin
    whose feed is swapped on the launch of a series among them (`Cell.feed_from`).

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], copies=[1, 3], repeats=2, warm_repeats=True,
    ...                       baselines=["gpu-only"], feed_swaps=True)
    >>> warm_launches(cells(spec)), warm_launches(cells(dataclasses.replace(spec, feed_swaps=False)))
    (2, 4)
    """
    series = {cell.series for cell in cells}
    return len(series) - len({cell.series for cell in cells if cell.feed_from in series})


def lone_mode(spec: ExperimentSpec) -> ModeSpec | None:
    """The spec's own mode that runs its one job alone at copies 1 (exclusive, or naive with one job), if any."""
    alone = [m for m in spec.modes if m.name == "exclusive" or (m.name == "naive" and len(spec.jobs) == 1)]
    return alone[0] if alone and 1 in spec.copies else None


def cell_named(spec: ExperimentSpec, cell_id: str) -> Cell:
    """The cell of `spec` that `cell_id` names, a repeat past its `repeats` too (`again=True` numbers a cell's new
    repeat so); KeyError for an id of none.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")])
    >>> cell_named(spec, cells(dataclasses.replace(spec, repeats=4))[-1].cell_id).label
    'naive-x1-r3'
    """
    repeat = re.search(r"-r(\d+)-[0-9a-f]{10}$", cell_id)  # as `_cell` writes it
    wider = dataclasses.replace(spec, repeats=max(spec.repeats, int(repeat.group(1)) + 1)) if repeat else spec
    return {c.cell_id: c for c in cells(wider)}[cell_id]


def _cell(spec: ExperimentSpec, mode: ModeSpec, copies: int, repeat: int, jobs: list[JobSpec] | None = None,
          baseline: str | None = None, feed_from: str | None = None) -> Cell:
    """A cell whose id fingerprints the jobs it runs (its own, or the spec's) and whether its feed is swapped."""
    ran = spec if jobs is None else dataclasses.replace(spec, jobs=jobs)
    cell_id = f"{safe_name(mode.label)}-x{copies}-r{repeat}-{jobs_fingerprint(ran, feed_from is not None)}"
    one_of_mix = jobs[0].model.removeprefix("timm.") if jobs and len(jobs) == 1 and len(spec.jobs) > 1 else None
    return Cell(mode, copies, repeat, f"{baseline}-{cell_id}" if baseline else cell_id,
                None if jobs is None else tuple(jobs), baseline, feed_from, one_of_mix)


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
        """The plan for `spec` in `folder`; `in_flight`: ids of cells an executor has under way elsewhere. A lone
        baseline's repeats past `repeats` count only once run (`precision.precision_repeats`: run while needed)."""
        states = folder.cell_states()
        every = [c for c in cells(spec) if c.repeat < spec.repeats or c.cell_id in states or c.cell_id in in_flight]
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

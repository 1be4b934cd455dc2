"""The experiment folder `out/<name>/`, owned here: every file the run pipeline keeps beside the runs, and the state
of each cell read from the runs.

    out/<name>/specs/<fingerprint>.json     the spec as run (cell processes and Slurm tasks read it)
    out/<name>/machines/<host>-<tag>.json   the machine, described once per experiment and host (or Slurm task)
    out/<name>/slurm/submitted.json         {cell id: Slurm job id} of every cell submitted from the folder
    out/<name>/slurm/<job id>/              submitit's files for each Slurm task (its logs)
    out/<name>/dispatch/<cell>.gpu<N>.stderr.log   each cell process's stderr, on several GPUs
    out/<name>/not-run.json                 {cell: why} for the cells an experiment chose not to run (seed.py)
    out/<name>/commands.json                each command's wall time, complete or interrupted (seed_run.py)
    out/<name>/<run id>/                    one run directory per cell run (rundir.py)

Every JSON file goes through `atomic.write_json`.

    >>> import tempfile
    >>> folder = ExperimentFolder.of(tempfile.mkdtemp(), "demo study")
    >>> folder.path.name
    'demo_study'
    >>> folder.record_not_run("resnet50 x7", "does not fit"); folder.not_run()
    {'resnet50 x7': 'does not fit'}
    >>> folder.cell_states()
    {}
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colloc_kit import atomic, paths
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import COMPLETE, Status
from colloc_kit.store.manifest import MANIFEST
from colloc_kit.store.rundir import RunDir, effective_status, find_runs, safe_name

__all__ = ["CellState", "ExperimentFolder", "spec_fingerprint"]

SPECS, MACHINES, SLURM, DISPATCH, NOT_RUN = "specs", "machines", "slurm", "dispatch", "not-run.json"
COMMANDS = "commands.json"
SUBMITTED = "submitted.json"


def spec_fingerprint(spec: ExperimentSpec) -> str:
    """Ten hex digits naming the whole spec (its spec file in the experiment folder)."""
    text = json.dumps(spec.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class CellState:
    """What the experiment folder holds of one cell: its run's status (a complete run if it has one, else the
    latest), that run, and the GPU and host it ran on."""

    cell_id: str
    status: Status
    run: RunDir
    gpu: int | None
    host: str | None


@dataclass(frozen=True)
class ExperimentFolder:
    """One experiment's folder: where its specs, machine descriptions, Slurm records, cell logs and not-run records
    are, and what its runs say of each cell."""

    path: Path

    @classmethod
    def of(cls, out: str | Path, name: str) -> "ExperimentFolder":
        """The folder of experiment `name` under the results folder `out`."""
        return cls(Path(out) / safe_name(name))

    @classmethod
    def writable(cls, out: str | Path, name: str) -> "ExperimentFolder":
        """The folder of experiment `name` under `out`, once both are fit to hold results (`paths.check_folder`:
        text, length, a folder, writable; not inside a run's folder); BadInput saying what is wrong before anything
        starts."""
        what = "results folder (--out)"
        out = paths.check_folder(out, what, write=True)
        run = next((p for p in (out, *out.parents) if (p / MANIFEST).is_file()), None)
        if run is not None:  # the new experiment would nest in a run's folder, where no reader looks for one
            raise BadInput(f"{what} {paths.shown(out)} is inside the run folder {paths.shown(run)}; give the folder "
                           f"that holds your experiments, e.g. --out {paths.shown(run.parent.parent)}")
        folder = cls.of(out, name)
        paths.check_folder(folder.path, what, write=True)
        return folder

    @property
    def out(self) -> Path:
        """The results folder that holds this experiment (run directories are made under it, by name)."""
        return self.path.parent

    def write_spec(self, spec: ExperimentSpec) -> Path:
        """Store `spec` as run (named by its fingerprint); returns the file."""
        return atomic.write_json(self.path / SPECS / f"{spec_fingerprint(spec)}.json", spec.to_dict())

    def specs(self) -> list[ExperimentSpec]:
        """Every spec run into this folder, oldest first; a file there that is not one is passed over (`damaged`
        names it)."""
        found = []
        for file in self._spec_files():
            try:
                found.append(_read_spec(file))
            except BrokenRun:
                continue
        return found

    def damaged(self) -> list[str]:
        """What in this folder cannot be read, each with what is wrong and what to do: its spec files,
        `slurm/submitted.json`, `not-run.json`, `commands.json`, and run manifests (their cells read as not run); or
        the folder itself, where a file stands in its place or it cannot be listed."""
        if os.path.lexists(self.path) and not self.path.is_dir():
            return [f"{self.path} is a file, not the experiment's folder (its cells read as not run); move it away"]
        if self.path.is_dir() and not os.access(self.path, os.R_OK | os.X_OK):
            return [f"{self.path} cannot be read (no permission; its cells read as not run); fix its permissions"]
        problems = []
        for file in self._spec_files():
            try:
                _read_spec(file)
            except BrokenRun as exc:
                problems.append(str(exc))
        for read in (self.submitted, self.not_run, self.commands, *(run.read_manifest for run in find_runs(self.path))):
            try:
                read()
            except BrokenRun as exc:
                problems.append(str(exc))
        return problems

    def _spec_files(self) -> list[Path]:
        def modified(file: Path) -> float:
            try:
                return file.stat().st_mtime
            except OSError:  # a dangling link: read (and named) last
                return float("inf")

        return sorted((self.path / SPECS).glob("*.json"), key=modified)

    def write_machine(self, info: dict[str, Any], tag: str | None = None) -> Path:
        """Store a machine description, named by host and `tag`, else by the time: a command in the same second as an
        earlier one takes a name of its own (`-1`, ...), never the earlier's file; returns the file."""
        host = safe_name(info["host"]["hostname"])
        if tag:
            return atomic.write_json(self.path / MACHINES / f"{host}-{safe_name(tag)}.json", info)
        return atomic.write_new_json(self.path / MACHINES, f"{host}-{time.strftime('%Y%m%d-%H%M%S')}", info)

    @property
    def slurm_dir(self) -> Path:
        """`slurm/`: the submitted cells, and submitit's folder per task."""
        return self.path / SLURM

    def submitted(self) -> dict[str, str]:
        """{cell_id: Slurm job id} of every cell ever submitted from this folder."""
        path = self.slurm_dir / SUBMITTED
        return _read_json(path, dict) if path.exists() else {}

    def record_submitted(self, ids: dict[str, str]) -> None:
        """Add {cell_id: Slurm job id} to the submitted cells."""
        atomic.write_json(self.slurm_dir / SUBMITTED, {**self.submitted(), **ids})

    def dispatch_log(self, name: str, gpu: int) -> Path:
        """Where a process the dispatcher started for GPU `gpu` (its lane) keeps its stderr (the folder is made)."""
        (self.path / DISPATCH).mkdir(parents=True, exist_ok=True)
        return self.path / DISPATCH / f"{name}.gpu{gpu}.stderr.log"

    def not_run(self) -> dict[str, str]:
        """{cell: why} of the cells the experiment chose not to run."""
        path = self.path / NOT_RUN
        return _read_json(path, dict) if os.path.lexists(path) else {}

    def record_not_run(self, cell: str, why: str) -> None:
        """Add `cell` and why it was not run, keeping what earlier runs into the folder recorded."""
        atomic.write_json(self.path / NOT_RUN, {**self.not_run(), cell: why}, indent=1)

    def commands(self) -> list[dict]:
        """The commands that ran into this folder, each {started_at, ended_at (Unix times), wall_s, measured (cells),
        ended ("complete" or "interrupted")}: what a resumed experiment took, command by command."""
        path = self.path / COMMANDS
        return _read_json(path, list) if os.path.lexists(path) else []

    def record_command(self, started_at: float, ended_at: float, measured: int, ended: str) -> None:
        """Add one command's wall time (`commands`), keeping those of earlier commands into the folder."""
        record = {"started_at": started_at, "ended_at": ended_at, "wall_s": round(ended_at - started_at, 3),
                  "measured": measured, "ended": ended}
        atomic.write_json(self.path / COMMANDS, [*self.commands(), record], indent=1)

    def cell_states(self) -> dict[str, CellState]:
        """The state of every cell that has a run here: complete if any of its runs completed, else the latest run's
        effective status (`rundir.effective_status`: "running" only while its process lives)."""
        found: dict[str, CellState] = {}
        for run in find_runs(self.path) if self.path.exists() else []:
            try:
                manifest = run.read_manifest()
            except BrokenRun:
                continue  # not a run of any cell: `load()` names it; its cell, if any, runs again
            if manifest.cell_id is None:
                continue
            state = CellState(manifest.cell_id, effective_status(manifest), run, manifest.gpu,
                              manifest.machine.hostname)
            previous = found.get(manifest.cell_id)
            if previous is None or previous.status != COMPLETE:  # runs are sorted by path: by start time
                found[manifest.cell_id] = state
        return found


def _read_json(path: Path, kind: type) -> Any:
    """The JSON value of a file of the folder's own, of type `kind`; BrokenRun naming the file otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, not JSON
        raise BrokenRun(f"{path} cannot be read as JSON ({getattr(exc, 'strerror', None) or exc}); move it away "
                        "(the kit writes it again where it needs it)", path=path) from None
    if not isinstance(data, kind):
        raise BrokenRun(f"{path} holds a JSON {type(data).__name__}, not {kind.__name__}; move it away", path=path)
    return data


def _read_spec(file: Path) -> ExperimentSpec:
    """One spec file of `specs/`; BrokenRun naming it where it cannot be read as an experiment spec."""
    try:
        return ExperimentSpec.from_mapping(_read_json(file, dict))
    except BadInput as exc:
        raise BrokenRun(f"{file} cannot be read as an experiment spec ({exc}); move it out of {SPECS}/ (its cells "
                        "are then listed from their runs alone)", path=file) from None

"""Cells as MLflow runs on a tracking server: `export` writes runs read back from their folders (or a reference set),
`log_cell` one cell as it completes (the run pipeline calls it; a failure is a warning, never a lost run: the run
folder stays the record).

    >>> exported = export(colloc_kit.load("runs/study"), "http://127.0.0.1:5000")        # doctest: +SKIP
    >>> print(exported)                                                                  # doctest: +SKIP
    MLflow at http://127.0.0.1:5000: 12 cells written (31 jobs), 0 already there ...

MLflow is an optional extra (`pip install 'colloc-kit[mlflow]'`), imported only by `client`, only when used. Each run
folder becomes one parent run with one child run per job (`mlflow_records` says what each holds), written with
`MlflowClient.log_batch`. The export is idempotent: a run already there (tag `colloc_kit.run_id`) is not written
again, only what it lacks is added (e.g. normalized throughput once its cell's baseline ran); the tag
`colloc_kit.exported` is set last, so a run that an export left half-written lacks it, and the next export replaces it.
Ctrl-C stops the writers (`writers`) within a second; `ExportInterrupted` says what was written and what not.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from colloc_kit.analysis.results import Results, RunReading, assemble, read_run
from colloc_kit.errors import BadInput, BrokenRun, CollocKitError
from colloc_kit.paths import check_folder
from colloc_kit.statuses import COMPLETE, RUNNING
from colloc_kit.store.rundir import RunDir, effective_status, find_runs
from colloc_kit.tracking.client import Tracker, mlflow_client, settings, short_error
from colloc_kit.tracking.records import COMPLETE_TAG, STATUS_TAG, Record, records
from colloc_kit.tracking.writers import written

__all__ = ["ExportInterrupted", "Exported", "Unreachable", "check", "export", "log_cell", "log_experiment",
           "warn_unreachable"]

PROBE_TIMEOUT_S = 5.0
LOG_WAIT_S = 15.0  # the longest a run waits on MLflow for one cell (or the experiment's at its end), then goes on
SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks")  # "": a folder
WORKERS = 8  # cells written at a time: a tracking server answers several requests at once


class Unreachable(BadInput):
    """An MLflow tracking server that did not answer the probe (a run goes on with a warning; an export stops)."""


class ExportInterrupted(KeyboardInterrupt):
    """Ctrl-C during an export's writing; its message says what was written and what not (`Exported.cut`)."""


@dataclass
class Exported:
    """What an export did, by kit run id: written anew, replaced (left half-written before), completed with figures
    they lacked, already there, or not written because still running.

    >>> print(Exported("http://127.0.0.1:5000", {"demo": "1"}, created=["r1"], skipped=["r0"], jobs=2))
    ... # doctest: +ELLIPSIS
    MLflow at http://127.0.0.1:5000: 1 cells written (2 jobs), 1 already there; experiments demo: http://...1
    """

    uri: str
    experiments: dict[str, str] = field(default_factory=dict)  # MLflow experiment name -> id
    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    jobs: int = 0

    def __str__(self) -> str:
        where = "; ".join(f"{name}: {self.uri.rstrip('/')}/#/experiments/{eid}" if self.uri.startswith("http")
                          else f"{name} (id {eid})" for name, eid in self.experiments.items())
        parts = [f"{len(self.created) + len(self.replaced)} cells written ({self.jobs} jobs)",
                 f"{len(self.replaced)} of them replacing a half-written one" if self.replaced else "",
                 f"{len(self.skipped)} already there" if self.skipped else "",
                 f"{len(self.filled)} completed with figures they lacked" if self.filled else "",
                 f"{len(self.running)} still running, not written: export again when they end" if self.running else ""]
        return f"MLflow at {self.uri}: {', '.join(p for p in parts if p)}; experiments {where or 'none'}"

    def cut(self, cells: int) -> str:
        """What an export interrupted after this much of `cells` cells leaves, in one line.

        >>> Exported("sqlite:///m.db", created=["r1"], skipped=["r0"], jobs=2).cut(5)  # doctest: +ELLIPSIS
        'interrupted; MLflow at sqlite:///m.db has 1 of 5 cells written (2 jobs), 1 already there; 3 not written ...'
        """
        written = self.created + self.replaced
        there = f", {len(self.skipped) + len(self.filled)} already there" if self.skipped or self.filled else ""
        rest = cells - len(written) - len(self.skipped) - len(self.filled)
        return (f"interrupted; MLflow at {self.uri} has {len(written)} of {cells} cells written ({self.jobs} jobs)"
                f"{there}; {rest} not written (a cell cut midway lacks the tag {COMPLETE_TAG}=true and the next "
                "export replaces it): export again to write them")


def check(uri: str) -> None:
    """Refuse (BadInput) a tracking URI that cannot be used, probed once and within PROBE_TIMEOUT_S: MLflow not
    installed, a scheme MLflow does not store runs in, a local store (`sqlite:///`, `file:`, a folder) the kit cannot
    write, or an http(s) server that does not answer. A database server's URI is MLflow's to open."""
    mlflow_client()
    if not isinstance(uri, str) or not uri.strip():
        raise BadInput(f"the MLflow tracking URI must be text such as http://127.0.0.1:5000, got {uri!r}")
    scheme = urllib.parse.urlsplit(uri).scheme.split("+")[0].lower() if "://" in uri or uri.startswith("file:") else ""
    if scheme not in SCHEMES:
        raise BadInput(f"MLflow cannot store runs at {uri} (scheme {scheme}:); give http(s)://host:port, "
                       "sqlite:///path/mlflow.db, file:/path or a folder")
    if scheme in ("", "file", "sqlite"):
        _check_local_store(uri, scheme)
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=PROBE_TIMEOUT_S):
                return
        except urllib.error.HTTPError:
            return  # it answered (a proxy asking for credentials, ...): MLflow's own calls say more
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise Unreachable(f"cannot reach the MLflow tracking server at {uri} ({reason}); start one, e.g. `mlflow "
                           "server --host 127.0.0.1 --port 5000`, or give the right --tracking-uri") from None


def _check_local_store(uri: str, scheme: str) -> None:
    """A local store is fit where its file (sqlite) or folder can be written (MLflow would otherwise retry for
    minutes and end in a database error)."""
    path = Path(urllib.parse.urlsplit(uri).path if scheme else uri).expanduser()
    if scheme == "sqlite":
        path = Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else path
        if path.is_dir():
            raise BadInput(f"the MLflow store {uri} is a folder, not a database file; give sqlite:///path/mlflow.db")
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise BadInput(f"the MLflow store {uri} cannot be written (permission denied); give another file")
        path = path.parent  # (sqlite makes no folder: it must be there)
    check_folder(path, f"the MLflow store {uri}:", write=True, exists=scheme == "sqlite")
    nearest = next(p for p in (path, *path.parents) if p.is_dir())
    try:  # permission bits do not tell for root, a read-only mount or /proc: a file made and removed does
        with tempfile.TemporaryFile(dir=nearest):
            pass
    except OSError as exc:
        raise BadInput(f"the MLflow store {uri} cannot be written ({exc.strerror}); give a store in a folder you "
                       "can write") from None


def export(results: Results, uri: str, experiment: str | None = None, samples: bool = False,
           source: str | None = None, only: set[str] | None = None, workers: int = WORKERS) -> Exported:
    """Write every run of `results` (those named in `only`) to the tracking server at `uri`, into the MLflow
    experiment `experiment` (default: each run's experiment's name), `workers` cells at a time. BadInput before
    anything is written where the server cannot be used; CollocKitError naming what was written where it fails midway
    (export again: what is complete is skipped, a half-written run replaced). Runs still running are left out."""
    check(uri)
    cells = [r for r in records(results, samples=samples, source=source, experiment=experiment)
             if only is None or r.run_id in only]
    done = Exported(uri, running=[r.run_id for r in cells if r.tags[STATUS_TAG] == RUNNING])
    cells = [r for r in cells if r.tags[STATUS_TAG] != RUNNING]
    with settings():
        tracker = Tracker(uri)
        try:
            names = dict.fromkeys(cell.experiment for cell in cells)
            done.experiments = {name: tracker.experiment_id(name) for name in names}
            tracker.index(list(done.experiments.values()))
        except tracker.errors as exc:
            raise BadInput(f"the MLflow tracking server at {uri} refused the export before anything was written: "
                           f"{short_error(exc)}") from None
        counting = threading.Lock()

        def put(cell: Record) -> str:  # counted by its writer: a cell ended while the export stops is counted too
            outcome = tracker.put(cell, done.experiments[cell.experiment])
            with counting:
                getattr(done, outcome).append(cell.run_id)
                done.jobs += len(cell.children) if outcome in ("created", "replaced") else 0
            return outcome

        try:
            with contextlib.closing(written(cells, put, tracker.client, tracker.errors, workers)) as each:
                for n, (cell, outcome) in enumerate(each):
                    if isinstance(outcome, BaseException):
                        raise CollocKitError(f"MLflow at {uri} failed after {n} of {len(cells)} cells, at run "
                                             f"{cell.run_id}: {short_error(outcome)}; export again: complete runs are "
                                             "skipped and a half-written one is replaced") from None
        except KeyboardInterrupt:
            with counting:
                raise ExportInterrupted(done.cut(len(cells))) from None
    return done


def log_cell(uri: str, run: RunDir, reading: RunReading) -> None:
    """Log one cell's run as it completes (with its experiment's lone runs for its baselines); never raises: a
    failure is one warning on stderr, and the run stays in its folder to export later."""
    def baseline(other: RunDir) -> bool:
        try:
            manifest = other.read_manifest()
        except BrokenRun:
            return False
        return other.path != run.path and manifest.is_alone and effective_status(manifest) == COMPLETE

    def write() -> None:
        lone = [read_run(other) for other in find_runs(run.path.parent) if baseline(other)]
        export(assemble([reading, *lone]), uri, only={run.run_id}, source=str(run.path.parent))

    _bounded(uri, f"cell {run.run_id}", run.path.parent, write)


def log_experiment(uri: str, results: Results, folder: str) -> None:
    """At the end of a run: every cell of `results` not yet in MLflow written, and figures a logged cell lacked
    (its baseline ran after it) added; one line saying so. Never raises, as `log_cell`."""
    _bounded(uri, "the experiment's cells", folder,
             lambda: print(f"colloc-kit: {export(results, uri, source=folder)}", file=sys.stderr))


def _bounded(uri: str, what: str, folder: Any, write: Any) -> None:
    """`write()` in a daemon thread, waited for at most LOG_WAIT_S (a failure a warning, as `_warned`): a run never
    waits minutes on a tracking server; where it did not finish by then, one warning says so and the run goes on."""
    finished = threading.Event()

    def log() -> None:
        with _warned(uri, what, folder):
            write()
        finished.set()

    threading.Thread(target=log, name="mlflow-log", daemon=True).start()
    if not finished.wait(LOG_WAIT_S):
        print(f"colloc-kit: warning: MLflow at {uri} did not take {what} within {LOG_WAIT_S:.0f} s; the run goes on "
              f"without waiting; the runs are kept in {folder}; log them later with `colloc-kit export mlflow "
              f"{folder} --tracking-uri {uri}`", file=sys.stderr)


def warn_unreachable(uri: str) -> None:
    """Before a run: BadInput where the store cannot be used (`check`); one warning on stderr where the server at
    `uri` does not answer now (the run goes on; each cell tries again as it completes, waited for at most
    LOG_WAIT_S)."""
    try:
        check(uri)  # MLflow absent, a scheme it does not store in, a local store not writable: refused
    except Unreachable as exc:
        print(f"colloc-kit: warning: {exc}; the runs go on and stay in their folders, each cell tries again",
              file=sys.stderr)


@contextlib.contextmanager
def _warned(uri: str, what: str, folder: Any) -> Iterator[None]:
    """Turn any failure of logging `what` into one warning on stderr (an interrupt still propagates)."""
    try:
        yield
    except Exception as exc:  # the run is on disk; MLflow is a copy, never a reason to lose it
        problem = str(exc) if isinstance(exc, CollocKitError) else f"{type(exc).__name__}: {short_error(exc)}"
        print(f"colloc-kit: warning: {what} not logged to MLflow at {uri}: {problem}; the runs are kept in {folder}; "
              f"log them later with `colloc-kit export mlflow {folder} --tracking-uri {uri}`", file=sys.stderr)

"""Cells as MLflow runs on a tracking server: `export` writes runs read back from their folders (or a reference set),
`log_cell` one cell as it completes (the run pipeline calls it; a failure is a warning, never a lost run: the run
folder stays the record).

    >>> exported = export(colloc_kit.load("runs/study"), "http://127.0.0.1:5000")        # doctest: +SKIP
    >>> print(exported)                                                                  # doctest: +SKIP
    MLflow at http://127.0.0.1:5000: 12 cells written (31 jobs), 0 already there ...

MLflow is an optional extra (`pip install 'colloc-kit[mlflow]'`), imported here only, and only when used. Each run
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
import time
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
from colloc_kit.tracking.records import COMPLETE_TAG, JOB_TAG, KIND_TAG, RUN_TAG, STATUS_TAG, Record, records
from colloc_kit.tracking.writers import Calls, written

__all__ = ["ExportInterrupted", "Exported", "Unreachable", "check", "export", "log_cell", "log_experiment",
           "warn_unreachable"]

INSTALL = "pip install 'colloc-kit[mlflow]'"
PROBE_TIMEOUT_S = 5.0
LOG_WAIT_S = 15.0  # the longest a run waits on MLflow for one cell (or the experiment's at its end), then goes on
SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks")  # "": a folder
BATCH = 1000  # MlflowClient.log_batch: at most 1000 metrics, params and tags together, 100 params
SEARCH_PAGE = 5000
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}  # MLflow's UI: training runs, not GenAI
WORKERS = 8  # cells written at a time: a tracking server answers several requests at once
SETTINGS = {  # MLflow's client settings while the kit writes (a value set in the environment is kept)
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # no "View run at" line (and request) per run
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",  # a server gone mid-export fails in seconds, not minutes
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


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
    _mlflow_client()
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
    with _settings():
        tracker = _Tracker(uri)
        try:
            names = dict.fromkeys(cell.experiment for cell in cells)
            done.experiments = {name: tracker.experiment_id(name) for name in names}
            tracker.index(list(done.experiments.values()))
        except tracker.errors as exc:
            raise BadInput(f"the MLflow tracking server at {uri} refused the export before anything was written: "
                           f"{_short(exc)}") from None
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
                                             f"{cell.run_id}: {_short(outcome)}; export again: complete runs are "
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


class _Tracker:
    """The MLflow client for one export: experiments by name, the kit's runs already there, writing a record."""

    def __init__(self, uri: str):
        client_class, self.errors = _mlflow_client()
        from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 - optional extra, imported only when used

        self.Metric, self.Param, self.RunTag = Metric, Param, RunTag
        try:
            self.client = Calls(client_class(tracking_uri=uri))  # an interrupted export starts no call after it
        except self.errors as exc:
            raise BadInput(f"MLflow cannot use the tracking URI {uri!r}: {_short(exc)}") from None
        self.uri = uri
        self.cells: dict[tuple[str, str], Any] = {}  # (experiment id, kit run id) -> MLflow run
        self.jobs: dict[tuple[str, str, str], Any] = {}  # (experiment id, kit run id, job) -> MLflow run

    def experiment_id(self, name: str) -> str:
        """The id of the MLflow experiment `name`, created if absent; BadInput if it is deleted."""
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return self.client.create_experiment(name, tags=EXPERIMENT_TAGS)
            except self.errors:  # created meanwhile (another cell process)
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    raise
        if found.lifecycle_stage == "deleted":
            raise BadInput(f"the MLflow experiment {name!r} at {self.uri} is deleted; restore it (`mlflow experiments "
                           f"restore --experiment-id {found.experiment_id}`) or give another --experiment-name")
        return found.experiment_id

    def index(self, experiment_ids: list[str]) -> None:
        """Read the kit's runs already in these experiments (two searches, paged)."""
        for kind in ("cell", "job"):
            for run in self._search(experiment_ids, kind):
                tags, eid = run.data.tags, run.info.experiment_id
                if kind == "cell":
                    self.cells[(eid, tags.get(RUN_TAG, ""))] = run
                else:
                    self.jobs[(eid, tags.get(RUN_TAG, ""), tags.get(JOB_TAG, ""))] = run

    def put(self, cell: Record, eid: str) -> str:
        """Write `cell` unless it is there whole; 'created', 'replaced', 'filled' or 'skipped'."""
        old = self.cells.get((eid, cell.run_id))
        if old is not None and old.data.tags.get(COMPLETE_TAG) == "true":
            return "filled" if self._fill(cell, old, eid) else "skipped"
        if old is not None:
            for (e, run_id, _), job in list(self.jobs.items()):
                if e == eid and run_id == cell.run_id:
                    self.client.delete_run(job.info.run_id)
            self.client.delete_run(old.info.run_id)
        self._write(cell, eid)
        return "created" if old is None else "replaced"

    def _write(self, record: Record, eid: str, parent: str | None = None) -> None:
        tags = {**record.tags, **({"mlflow.parentRunId": parent} if parent else {})}
        run_id = self.client.create_run(eid, start_time=record.start_ms, tags=tags, run_name=record.name).info.run_id
        for path, folder in record.artifacts:
            self.client.log_artifact(run_id, str(path), folder)
        for child in record.children:
            self._write(child, eid, run_id)
        self.client.set_terminated(run_id, record.status, end_time=record.end_ms)
        self._log(run_id, record, record.metrics, anew=True, whole=parent is None)  # the cell's last write

    def _fill(self, cell: Record, old: Any, eid: str) -> bool:
        """Add the figures a complete run (and its jobs) lacks; whether there were any."""
        pairs = [(old, cell)] + [(self.jobs[key], job) for job in cell.children
                                 if (key := (eid, cell.run_id, job.name)) in self.jobs]
        added = False
        for run, record in pairs:
            missing = {k: v for k, v in record.metrics.items() if k not in run.data.metrics}
            if missing:
                self._log(run.info.run_id, record, missing, anew=False)
                added = True
        return added

    def _log(self, run_id: str, record: Record, metrics: dict[str, float], anew: bool, whole: bool = False) -> None:
        """`metrics` at the run's end time; for a run written anew also its params and histories; in batches, the
        last one carrying the tag that says the run is whole where `whole`."""
        stamp = record.end_ms or record.start_ms or int(time.time() * 1000)
        values = [self.Metric(k, v, stamp, 0) for k, v in metrics.items()]
        if anew:
            values += [self.Metric(p.key, p.value, p.timestamp_ms, p.step) for p in record.histories]
        params = [self.Param(k, v) for k, v in record.params.items()] if anew else []
        first = BATCH - len(params) - 1
        batches = [(values[:first], params)] + [(values[i:i + BATCH - 1], []) for i in range(first, len(values),
                                                                                          BATCH - 1)]
        for n, (part, named) in enumerate(batches, 1):
            last = [self.RunTag(COMPLETE_TAG, "true")] if whole and n == len(batches) else []
            self.client.log_batch(run_id, metrics=part, params=named, tags=last)

    def _search(self, experiment_ids: list[str], kind: str) -> list[Any]:
        found: list[Any] = []
        token = None
        while experiment_ids:
            page = self.client.search_runs(experiment_ids, f"tags.`{KIND_TAG}` = '{kind}'", max_results=SEARCH_PAGE,
                                           page_token=token)
            found += page
            token = page.token
            if not token:
                break
        return found


def _mlflow_client() -> tuple[type, tuple[type[BaseException], ...]]:
    """MLflow's client class and the errors its calls raise; BadInput saying how to install it where it is absent."""
    try:
        from mlflow.exceptions import MlflowException  # noqa: PLC0415 - optional extra, imported only when used
        from mlflow.tracking import MlflowClient  # noqa: PLC0415 - optional extra, imported only when used
    except ImportError:
        raise BadInput(f"MLflow is not installed here; {INSTALL}") from None
    return MlflowClient, (MlflowException, OSError)


@contextlib.contextmanager
def _settings() -> Iterator[None]:
    """MLflow's client SETTINGS in the environment while the kit writes (values already set are kept)."""
    added = {k: v for k, v in SETTINGS.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextlib.contextmanager
def _warned(uri: str, what: str, folder: Any) -> Iterator[None]:
    """Turn any failure of logging `what` into one warning on stderr (an interrupt still propagates)."""
    try:
        yield
    except Exception as exc:  # the run is on disk; MLflow is a copy, never a reason to lose it
        problem = str(exc) if isinstance(exc, CollocKitError) else f"{type(exc).__name__}: {_short(exc)}"
        print(f"colloc-kit: warning: {what} not logged to MLflow at {uri}: {problem}; the runs are kept in {folder}; "
              f"log them later with `colloc-kit export mlflow {folder} --tracking-uri {uri}`", file=sys.stderr)


def _short(exc: BaseException) -> str:
    """An MLflow error in one line (its messages can carry a whole HTTP response)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."

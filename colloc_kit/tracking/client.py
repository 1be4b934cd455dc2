"""The MLflow client the kit writes with, the one module that imports MLflow (only when used): `Tracker` (one
export's client: experiments by name, the kit's runs already there, a record written in batches), MLflow's client
`settings` while the kit writes, and an MLflow error in one line (`short_error`). `log` says what is written, and when.

    >>> short_error(ValueError("a   response  spread   out"))
    'a response spread out'
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator

from colloc_kit.errors import BadInput
from colloc_kit.tracking.records import COMPLETE_TAG, JOB_TAG, KIND_TAG, RUN_TAG, Record
from colloc_kit.tracking.writers import Calls

__all__ = ["Tracker", "mlflow_client", "settings", "short_error"]


INSTALL = "pip install 'colloc-kit[mlflow]'"
BATCH = 1000  # MlflowClient.log_batch: at most 1000 metrics, params and tags together, 100 params
SEARCH_PAGE = 5000
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}  # MLflow's UI: training runs, not GenAI
SETTINGS = {  # MLflow's client settings while the kit writes (a value set in the environment is kept)
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # no "View run at" line (and request) per run
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",  # a server gone mid-export fails in seconds, not minutes
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


class Tracker:
    """The MLflow client for one export: experiments by name, the kit's runs already there, writing a record."""

    def __init__(self, uri: str):
        client_class, self.errors = mlflow_client()
        from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 - optional extra, imported only when used

        self.Metric, self.Param, self.RunTag = Metric, Param, RunTag
        try:
            self.client = Calls(client_class(tracking_uri=uri))  # an interrupted export starts no call after it
        except self.errors as exc:
            raise BadInput(f"MLflow cannot use the tracking URI {uri!r}: {short_error(exc)}") from None
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


def mlflow_client() -> tuple[type, tuple[type[BaseException], ...]]:
    """MLflow's client class and the errors its calls raise; BadInput saying how to install it where it is absent."""
    try:
        from mlflow.exceptions import MlflowException  # noqa: PLC0415 - optional extra, imported only when used
        from mlflow.tracking import MlflowClient  # noqa: PLC0415 - optional extra, imported only when used
    except ImportError:
        raise BadInput(f"MLflow is not installed here; {INSTALL}") from None
    return MlflowClient, (MlflowException, OSError)


@contextlib.contextmanager
def settings() -> Iterator[None]:
    """MLflow's client SETTINGS in the environment while the kit writes (values already set are kept)."""
    added = {k: v for k, v in SETTINGS.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def short_error(exc: BaseException) -> str:
    """An MLflow error in one line (its messages can carry a whole HTTP response)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."

"""Cells written to MLflow by daemon threads that an interrupt can cut: `written` yields each cell as its writer ends
it; once the caller stops (Ctrl-C, an error) no writer takes another cell or starts another MLflow call, and the calls
under way get at most STOP_GRACE_S to end (`Calls.settle`). An interrupted export so ends within a second, with no
store call cut midway where the store answers; a cell cut between its calls lacks the tag that says it is whole, and
the next export replaces it.

    >>> calls = Calls({"a": 1})                          # any object stands for MLflow's client
    >>> calls.get("a")
    1
    >>> calls.settle(0.1)
    >>> calls.get("a")
    Traceback (most recent call last):
    ...
    colloc_kit.tracking.writers.Stopped: the export was stopped; no MLflow call starts after that
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any, Callable, Generator, TypeVar

__all__ = ["STOP_GRACE_S", "Calls", "Stopped", "written"]

STOP_GRACE_S = 0.5  # the longest a stopped export waits for the MLflow calls under way (Ctrl-C ends within a second)
Cell = TypeVar("Cell")


class Stopped(Exception):
    """An MLflow call asked for after the export was stopped (a writer's last, never said)."""


class Calls:
    """MLflow's client with its calls counted: after `settle` none starts, and `settle` waits (bounded) for those
    under way."""

    def __init__(self, client: Any):
        self._client = client
        self._stopped = False
        self._under_way = 0
        self._changed = threading.Condition()

    @property
    def stopped(self) -> bool:
        """Whether `settle` was called: writers take no new cell."""
        return self._stopped

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._changed:
                if self._stopped:
                    raise Stopped("the export was stopped; no MLflow call starts after that")
                self._under_way += 1
            try:
                return method(*args, **kwargs)
            finally:
                with self._changed:
                    self._under_way -= 1
                    self._changed.notify_all()

        return call

    def settle(self, timeout: float) -> None:
        """Start no call from now on; wait at most `timeout` seconds for the calls under way to end."""
        with self._changed:
            self._stopped = True
            self._changed.wait_for(lambda: self._under_way == 0, timeout)


def written(cells: list[Cell], put: Callable[[Cell], Any], calls: Calls, errors: tuple[type[BaseException], ...],
            workers: int) -> Generator[tuple[Cell, Any], None, None]:
    """Each cell as `put(cell)` ended, `workers` at a time in daemon threads, with its outcome (or the error in
    `errors` that stopped it; any other error is raised). Closing it (the caller's interrupt or error) settles
    `calls`: no new cell or call, at most STOP_GRACE_S for those under way."""
    todo: queue.Queue = queue.Queue()
    for cell in cells:
        todo.put(cell)
    ended: queue.Queue = queue.Queue()

    def writer() -> None:
        while not calls.stopped:
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            try:
                ended.put((cell, put(cell)))
            except BaseException as exc:  # noqa: BLE001 - MLflow's errors said by the caller, any other raised
                ended.put((cell, exc))

    for _ in range(max(1, min(workers, len(cells)))):
        threading.Thread(target=writer, name="mlflow-writer", daemon=True).start()
    try:
        for _ in cells:
            item = None
            while item is None:
                with contextlib.suppress(queue.Empty):
                    item = ended.get(timeout=0.2)  # short waits: an interrupt is heard between them
            if isinstance(item[1], BaseException) and not isinstance(item[1], errors):
                raise item[1]
            yield item
            if isinstance(item[1], BaseException):
                return
    finally:
        calls.settle(STOP_GRACE_S)

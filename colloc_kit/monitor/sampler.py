"""The sampling loop: one background thread reads every source each interval; errors are recorded, never raised.

A source is anything with `series` (the name of the table its rows go to), `schema` (a pyarrow schema whose first
column is `t`), `absent` ({column: reason}), `notes` (list of texts), `read(t) -> list[tuple]` and `close()`.
Rows go to a store's `write(series, rows)` every `flush_every_s`, and once more on `stop()`.

    >>> sampler = Sampler([HostSource()], interval_s=0.15, store=MemoryStore())   # doctest: +SKIP
    >>> sampler.start(); run_something(); sampler.stop()                          # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol, Sequence

import pyarrow as pa

from colloc_kit import events

__all__ = ["MAX_DISTINCT_ERRORS", "Sampler", "Source", "SourceLost", "Store"]

MAX_DISTINCT_ERRORS = 50  # distinct (source, error) pairs kept; repeats only raise a count


class SourceLost(Exception):
    """A source can no longer be read (e.g. the GPU fell off the bus): the sampler drops it and goes on."""


class Source(Protocol):
    """What the sampler reads: a series of rows of one `schema`, with the columns it lacks and why."""

    series: str
    schema: pa.Schema
    absent: dict[str, str]
    notes: list[str]

    def read(self, t: float) -> list[tuple]:
        """The rows sampled at `t` (kit clock), in `schema`'s column order; SourceLost when it can read no more."""

    def close(self) -> None:
        """Free what the source holds; called once, when sampling ends."""


class Store(Protocol):
    """Where the sampler writes rows, series by series."""

    def write(self, series: str, rows: list[tuple]) -> None:
        """Keep `rows` of `series` (called from the sampler's thread, every flush)."""


class Sampler:
    """Reads `sources` every `interval_s` seconds on a daemon thread, stamping rows with the kit clock."""

    def __init__(self, sources: Sequence[Source], interval_s: float, store: Store, flush_every_s: float = 10.0,
                 listener: Callable[[str, list[tuple]], None] | None = None):
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        self.interval_s = interval_s
        self.flush_every_s = flush_every_s
        self.store = store
        self.listener = listener  # hears each sample's rows as they are read (a live view), outside the lock
        self.live: list[Source] = list(sources)
        self.lost: dict[str, dict[str, Any]] = {}  # series -> {"t", "reason"}
        self.errors: dict[tuple[str, str], dict[str, Any]] = {}
        self.ticks = 0
        self.late_ticks = 0  # ticks that started later than one interval after they were due
        self.busy_s = 0.0  # time spent reading sources: the monitor's own cost
        self._rows: dict[str, list[tuple]] = {s.series: [] for s in self.live}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling on a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="colloc-kit-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, take a last sample, write what is buffered and close the sources."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample_now()
        self.flush()
        for source in self.live:
            self._guard("close", source.series, source.close)

    def sample_now(self) -> float:
        """Read every live source once, now (also callable from other threads); returns the sample's time."""
        heard = []
        with self._lock:
            began, t = time.perf_counter(), events.now()
            for source in list(self.live):
                try:
                    rows = source.read(t)
                    self._rows[source.series] += rows
                    heard.append((source.series, rows))
                except SourceLost as exc:
                    self.live.remove(source)
                    self.lost[source.series] = {"t": t, "reason": str(exc)}
                    self._guard("close", source.series, source.close)
                except Exception as exc:  # a sampler error must never reach the run
                    self.record(source.series, exc, t)
            self.ticks += 1
            self.busy_s += time.perf_counter() - began
        if self.listener:
            for series, rows in heard:
                self._guard("listen", series, self.listener, series, rows)
        return t

    def flush(self) -> None:
        """Hand the buffered rows to the store."""
        with self._lock:
            pending = {series: rows for series, rows in self._rows.items() if rows}
            for series in pending:
                self._rows[series] = []
        for series, rows in pending.items():
            self._guard("write", series, self.store.write, series, rows)

    def error_list(self) -> list[dict[str, Any]]:
        """Each distinct error while sampling: source, error, first_t, last_t and count."""
        return list(self.errors.values())

    def _loop(self) -> None:
        due = last_flush = time.monotonic()
        while True:
            self._guard("sample", "sampler", self.sample_now)
            now = time.monotonic()
            if now - last_flush >= self.flush_every_s:
                self._guard("flush", "sampler", self.flush)
                last_flush = now = time.monotonic()
            due += self.interval_s
            if due < now - self.interval_s:  # fell behind (slow NVML call, suspended VM): skip, do not burst
                self.late_ticks += 1
                due = now
            if self._stop.wait(max(0.0, due - now)):
                return

    def _guard(self, what: str, series: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self.record(f"{series} ({what})", exc, events.now())

    def record(self, where: str, exc: BaseException, t: float) -> None:
        """Keep an error for monitor.json: each distinct one once, with a count and the times it was first/last seen."""
        key = (where, f"{type(exc).__name__}: {exc}")
        entry = self.errors.get(key)
        if entry is not None:
            entry["count"] += 1
            entry["last_t"] = t
        elif len(self.errors) < MAX_DISTINCT_ERRORS:
            self.errors[key] = {"source": where, "error": key[1], "first_t": t, "last_t": t, "count": 1}

"""Where samples go: Parquet files in the run's monitor folder (or memory, for measurement windows), and back.

Files in the monitor folder (`MB` is 2**20 bytes, as elsewhere in the kit)::

    samples_gpu.parquet        one row per sample of the device: NVML fields and GPM metrics
    samples_mig.parquet        one row per sample per MIG GPU instance: GPM metrics (MIG only)
    samples_process.parquet    one row per sample per GPU process: memory, SM utilization, job id
    samples_host.parquet       one row per sample: host CPU and memory
    samples_host_job.parquet   one row per sample per job: CPU, cores and resident memory of its processes
    monitor.json               interval, backend, columns recorded, absent columns and why, errors, notes

While a run goes on, rows are flushed as small files under `<series>.parts/`; `close()` merges them into one file.
A run killed before that still reads: `read_samples` falls back to the parts. Every file is written under a temporary
name and renamed (`atomic.replacing`), so a reader of a run being written (the panel, `show`, a notebook) never sees
half a file, and one that lists the parts just as they are merged and removed reads the merged file instead.

    >>> samples = read_samples("runs/demo/20261120-1200-naive-x4-r0")     # doctest: +SKIP
    >>> samples.gpu[["t", "sm_util_pct", "power_w"]]                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from colloc_kit import atomic

__all__ = ["INFO_FILE", "MemoryStore", "ParquetStore", "SERIES", "Samples", "read_samples", "table", "write_info"]

SERIES = ("samples_gpu", "samples_mig", "samples_process", "samples_host", "samples_host_job")
INFO_FILE = "monitor.json"


def table(schema: pa.Schema, rows: list[tuple]) -> pa.Table:
    """A pyarrow table from row tuples in the schema's column order."""
    columns: list[Any] = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema)


class ParquetStore:
    """Appends rows of each series as numbered part files; `close()` merges each series into `<series>.parquet`."""

    def __init__(self, out_dir: Path, schemas: dict[str, pa.Schema]):
        self.out_dir = Path(out_dir)
        self.schemas = schemas
        self._parts = {series: 0 for series in schemas}
        for series in schemas:
            (self.out_dir / f"{series}.parts").mkdir(parents=True, exist_ok=True)

    def write(self, series: str, rows: list[tuple]) -> None:
        """Write `rows` as one more part file of `series`."""
        path = self.out_dir / f"{series}.parts" / f"part-{self._parts[series]:05d}.parquet"
        with atomic.replacing(path) as tmp:  # a reader lists whole parts only (the temp name is not part-*)
            pq.write_table(table(self.schemas[series], rows), tmp)
        self._parts[series] += 1

    def close(self) -> None:
        """Merge each series' parts into `<series>.parquet` and remove the parts."""
        for series, schema in self.schemas.items():
            parts_dir = self.out_dir / f"{series}.parts"
            merged = _read_parts(parts_dir, schema)
            with atomic.replacing(self.out_dir / f"{series}.parquet") as tmp:  # whole, before the parts go
                pq.write_table(merged, tmp)
            shutil.rmtree(parts_dir)


class MemoryStore:
    """Keeps every row in memory (measurement windows); `frame(series)` gives a DataFrame. The sampler's thread
    writes while the caller's thread reads and trims, so all three hold one lock."""

    def __init__(self, schemas: dict[str, pa.Schema]):
        self.schemas = schemas
        self.rows: dict[str, list[tuple]] = {series: [] for series in schemas}
        self._lock = threading.Lock()

    def write(self, series: str, rows: list[tuple]) -> None:
        """Keep `rows` of `series`."""
        with self._lock:
            self.rows[series] += rows

    def keep_last(self, series: str) -> None:
        """Drop all but the newest row of `series` (what the next window starts from)."""
        with self._lock:
            self.rows[series] = self.rows[series][-1:]

    def frame(self, series: str) -> pd.DataFrame:
        """The rows of `series` so far as a DataFrame of its schema."""
        with self._lock:
            rows = list(self.rows[series])
        return table(self.schemas[series], rows).to_pandas()


def _read_parts(parts_dir: Path, schema: pa.Schema | None = None) -> pa.Table:
    parts = sorted(parts_dir.glob("part-*.parquet"))
    tables = [pq.read_table(p) for p in parts]
    if not tables:
        return table(schema, []) if schema is not None else pa.table({})
    return pa.concat_tables(tables)


@dataclass
class Samples:
    """The monitor's frames of one run; a series the run did not record is an empty frame (see `info`), and one
    whose file is damaged too (named in `problems`)."""

    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    mig: pd.DataFrame = field(default_factory=pd.DataFrame)
    process: pd.DataFrame = field(default_factory=pd.DataFrame)
    host: pd.DataFrame = field(default_factory=pd.DataFrame)
    host_job: pd.DataFrame = field(default_factory=pd.DataFrame)
    info: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_samples(path: str | Path) -> Samples:
    """The frames of a run directory's monitor folder (or of that folder itself); a run killed before the
    monitor merged its files is read from the parts. A file that cannot be read (damaged, foreign, a folder) leaves
    its series empty and is named in `problems`: the run's jobs are read without it."""
    monitor_dir = Path(path) / "monitor" if (Path(path) / "monitor").is_dir() else Path(path)
    frames: dict[str, pd.DataFrame] = {}
    problems: list[str] = []
    for series in SERIES:
        frames[series] = _read_series(monitor_dir, series, problems)
    info = _read_info(monitor_dir / INFO_FILE, problems)
    gpu, mig, process, host, host_job = (frames[s] for s in SERIES)
    return Samples(gpu, mig, process, host, host_job, info=info, problems=problems)


def _read_series(monitor_dir: Path, series: str, problems: list[str]) -> pd.DataFrame:
    """One series: its merged file, else its parts (read again from the top where a part or the parts folder went
    between listing and reading: the run merged them meanwhile); empty, and named in `problems`, where it cannot be
    read."""
    merged, parts = monitor_dir / f"{series}.parquet", monitor_dir / f"{series}.parts"
    for _ in range(3):
        source = merged if merged.exists() else parts if parts.is_dir() else None
        if source is None:
            return pd.DataFrame()
        if source == merged and not merged.is_file():
            problems.append(f"{merged} is not a file; the run is read without its {series}")
            return pd.DataFrame()
        try:
            frame = pd.read_parquet(merged) if source == merged else _read_parts(parts).to_pandas()
        except FileNotFoundError:
            continue  # merged and removed as we read: the merged file is there now
        except (OSError, ValueError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError too
            problems.append(f"{source} cannot be read ({_said(exc)}); the run is read without its {series}")
            return pd.DataFrame()
        if source == parts and not parts.is_dir() and merged.exists():
            continue  # the parts went while listed (a partial list): read the merged file
        if len(frame) and not ("t" in frame and pd.api.types.is_numeric_dtype(frame["t"])):
            problems.append(f"{source} has no sample times (column t); the run is read without its {series}")
            return pd.DataFrame()
        return frame
    return pd.DataFrame()


def _read_info(path: Path, problems: list[str]) -> dict[str, Any]:
    """monitor.json as a dict ({} where it is absent; where it is damaged too, and the damage named in `problems`)."""
    if not path.exists():
        return {}
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path} cannot be read as JSON ({_said(exc)}); the run is read without the monitor's notes")
        return {}
    if not isinstance(info, dict):
        problems.append(f"{path} holds a JSON {type(info).__name__}, not an object; the run is read without the "
                        "monitor's notes")
        return {}
    return info


def _said(exc: BaseException) -> str:
    """An error in a few words: its kind and the start of its message (Arrow's repeat the path)."""
    text = getattr(exc, "strerror", None) or str(exc).split(". ")[0]
    return f"{type(exc).__name__}: {text[:300]}"


def write_info(monitor_dir: Path, info: dict[str, Any]) -> None:
    """Write monitor.json atomically (`atomic.write_json`)."""
    atomic.write_json(monitor_dir / INFO_FILE, info, indent=1)

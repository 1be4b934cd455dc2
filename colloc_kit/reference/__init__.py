"""Reference data shipped with the kit: measured runs as compact tables, so that notebooks and students without a GPU
explore real measurements.

    >>> from colloc_kit import reference
    >>> reference.available()                                  # doctest: +SKIP
    ['h100-80gb']
    >>> results = reference.load("h100-80gb")                  # doctest: +SKIP
    >>> analysis.summarize(results)                            # the same as for the raw runs   # doctest: +SKIP
    >>> reference.monitor("h100-80gb")[["run_id", "sm_util_pct_mean", "energy_j"]]          # doctest: +SKIP
    >>> reference.export(["runs/seed-33", "runs/seed-37"], "h100-80gb",
    ...                  {"commands": ["colloc-kit run seed-33 --out runs"]})                 # doctest: +SKIP

A set is a folder `colloc_kit/reference/<name>/` (installed with the package) that `export` writes:

    jobs.parquet, epochs.parquet, runs.parquet   the frames `colloc_kit.load()` returns for the raw runs, unchanged
    monitor.parquet                              one row per run: the GPU monitor's figures (GPM, power, energy) and
                                                 the host's CPU over the run's common window (the whole sampled run
                                                 where it has none)
    not_run.parquet                              the cells an experiment did not run and why (its not-run.json, e.g.
                                                 the seed matrix's cells that cannot fit in memory)
    README.md                                    machine, GPU, driver, versions, commands, dates, the cells that ran,
                                                 what was left out

`load()` returns those frames as `Results`, so every function of `analysis`, `figures` and `plots` works on it
unchanged; only the raw monitor series (`.samples`, `.host_samples`) are left out, to keep a set a few MB (their
per-run summaries are `monitor()`, and the jobs frame keeps each job's window summaries). The raw run folders stay
reproducible from the commands in the README, not in the package.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from colloc_kit import __version__
from colloc_kit.analysis import summaries
from colloc_kit.analysis.results import Results, derive
from colloc_kit.analysis.results import load as load_runs
from colloc_kit.analysis.summaries import job_mix_label
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.machine import git_commit
from colloc_kit.monitor import summarize
from colloc_kit.paths import check_folder
from colloc_kit.predict.kept import kept
from colloc_kit.store.folder import NOT_RUN as NOT_RUN_FILE
from colloc_kit.store.rundir import RunDir, safe_name

__all__ = ["COMPRESSION", "DEFAULT", "HOST_NOT_FIGURES", "MONITOR", "NOT_RUN", "README", "SHIPPED", "TABLES",
           "available", "describe", "export", "folder", "load", "local_or_reference", "machines", "monitor", "not_run",
           "read_not_run", "readme", "render_readme", "run_monitor", "summary"]

SHIPPED = Path(__file__).parent
DEFAULT = "h100-80gb"  # what notebook 07 and the course sheets show where a folder holds no local runs
TABLES = ("jobs", "epochs", "runs")  # the frames of Results that a set keeps
MONITOR = "monitor"  # per-run monitor summaries
NOT_RUN = "not_run"  # cells an experiment did not run, and why
README = "README.md"
COMPRESSION = "zstd"
HOST_NOT_FIGURES = ("energy", "avg_power", "sampled")  # a window summary's GPU-only keys, left out for the host


def available(root: str | Path | None = None) -> list[str]:
    """The names of the reference sets under `root` (those installed with the package by default)."""
    root = Path(SHIPPED if root is None else root)
    return sorted(p.name for p in root.iterdir() if (p / "runs.parquet").is_file()) if root.is_dir() else []


def folder(name: str | Path) -> Path:
    """The folder of a set: a shipped name, or a folder that `export` wrote; BadInput saying what exists otherwise."""
    if isinstance(name, str) and name in available():
        return SHIPPED / name
    if not isinstance(name, (str, Path)):
        raise BadInput(f"a reference set is a name ({', '.join(available()) or 'none shipped'}) or a folder path, "
                       f"got {type(name).__name__} {str(name)[:40]!r}")
    path = Path(name).expanduser()
    if (path / "runs.parquet").is_file():
        return path
    shipped = ", ".join(available()) or "none in this install"
    raise BadInput(f"no reference set {str(name)!r}: the shipped sets are {shipped}; or give a folder that "
                   "`colloc-kit reference export` wrote (it holds runs.parquet)")


def load(name: str | Path = DEFAULT) -> Results:
    """The set's runs as `Results` (jobs, epochs, runs; the raw monitor series are not shipped), with the figures
    `results.derive` joins (baselines, fairness, shares) computed as `colloc_kit.load` computes them."""
    path = folder(name)
    return derive(Results(*(pd.read_parquet(path / f"{table}.parquet") for table in TABLES)))


def summary(name: str | Path = DEFAULT) -> pd.DataFrame:
    """`analysis.summarize(load(name))`, one row per cell of the set, kept on disk between processes (`predict.kept`,
    keyed by the set's bytes and the kit's source): a kernel that shows a set's cells reads back the first one's
    instead of summarizing its runs again (about 5 s of CPU for the thousand runs of h200-141gb).

        >>> summary("h100-attribution").equals(summaries.summarize(load("h100-attribution")))
        True
    """
    path = folder(name).resolve()
    slot = hashlib.sha256(str(path).encode()).hexdigest()[:16]  # one file a set: a later key replaces only its own
    return kept(f"summary-{slot}", [path], lambda: summaries.summarize(load(path)))


def monitor(name: str | Path = DEFAULT) -> pd.DataFrame:
    """One row per run of the set: its monitor's figures (see `run_monitor`)."""
    path = folder(name) / f"{MONITOR}.parquet"
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=["run_id"])


def not_run(name: str | Path = DEFAULT) -> pd.DataFrame:
    """The cells the set's experiments did not run: experiment, cell, why."""
    path = folder(name) / f"{NOT_RUN}.parquet"
    return pd.read_parquet(path) if path.is_file() else read_not_run([])


def read_not_run(experiment_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """The cells named in the experiment folders' not-run.json files (experiment, cell, why); none where absent."""
    rows = []
    for folder_ in dict.fromkeys(Path(d) for d in experiment_dirs):
        path = folder_ / NOT_RUN_FILE  # where `colloc_kit.experiments.seed_run.run` names them (pipeline/folder.py)
        try:
            found = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            found = {"(unreadable)": f"{path} cannot be read as JSON"}
        rows += [{"experiment": folder_.name, "cell": cell, "why": str(why)} for cell, why in found.items()]
    return pd.DataFrame(rows, columns=["experiment", "cell", "why"])


def readme(name: str | Path = DEFAULT) -> str:
    """The set's README: where, when and how it was measured, and what it leaves out."""
    return (folder(name) / README).read_text(encoding="utf-8")


def local_or_reference(results_dir: str | Path, name: str = DEFAULT) -> tuple[Results, str]:
    """The runs under `results_dir`, or the shipped set `name` where that folder holds none; and one line saying
    which (what a notebook prints, so that a reader always knows whose numbers are shown).

    >>> results, note = local_or_reference("runs")             # doctest: +SKIP
    >>> note                                                   # doctest: +SKIP
    'no runs in runs: showing the shipped H100 reference data (h100-80gb: 412 runs of seed-33, seed-37) ...'
    """
    local = load_runs(results_dir) if Path(results_dir).exists() else Results(*(pd.DataFrame() for _ in TABLES))
    if len(local.runs):
        return local, (f"{len(local.runs)} runs, {len(local.jobs)} jobs in {results_dir} "
                       f"({', '.join(sorted(local.runs['experiment'].dropna().unique()))})")
    if name not in available():
        return local, (f"no runs in {results_dir}, and no shipped reference data ({name}) in this install: "
                       "run the experiment notebooks or `colloc-kit batch` first")
    shipped = load(name)
    experiments = ", ".join(sorted(shipped.runs["experiment"].dropna().unique()))
    return shipped, (f"no runs in {results_dir}: showing the shipped {describe(name)} reference data ({name}: "
                     f"{len(shipped.runs)} runs of {experiments}); `colloc_kit.reference.readme({name!r})` says how "
                     "they were measured")


def describe(name: str) -> str:
    """A short word for a set's hardware: 'H100' for 'h100-80gb'."""
    return name.split("-")[0].upper()


def run_monitor(results: Results) -> pd.DataFrame:
    """One row per run: the GPU monitor's figures (`<metric>_mean/_p50/_p95`, `energy_j`, `avg_power_w`, ...) and
    the host's (`host_<metric>_...`) over the run's common window, or over the whole sampled run where it has none
    (`monitor_window` says which). Runs without samples get a row of their ids only.
    """
    rows = []
    for run in results.runs.itertuples(index=False):
        gpu, host = (_of_run(frame, run.run_id) for frame in (results.samples, results.host_samples))
        common = pd.notna(getattr(run, "window_start", None)) and pd.notna(getattr(run, "window_end", None))
        span = (run.window_start, run.window_end) if common else _span(gpu, host)
        row = {"run_id": run.run_id, "experiment": run.experiment, "monitor_window": None}
        if span and span[1] > span[0]:
            row["monitor_window"] = "common window" if common else "whole run"
            row["monitor_window_s"] = span[1] - span[0]
            if len(gpu):
                row.update(summarize(gpu, *span))
            if len(host):
                row.update({f"host_{k}": v for k, v in summarize(host, *span).items()
                            if k not in ("window_s", "samples") and not k.startswith(HOST_NOT_FIGURES)})
        rows.append(row)
    return pd.DataFrame(rows)


def _say_left_out(results: Results) -> None:
    """Name on stderr what the set will lack or hold only in part: broken runs (left out), damaged ones (read in
    part), runs still running (exported as they stand: export again once they end)."""
    for line in results.skipped():
        print(f"colloc-kit: reference export: {line}", file=sys.stderr)
    running = results.runs[results.runs["status"] == "running"] if "status" in results.runs else results.runs[:0]
    for run_dir in running.get("run_dir", []):
        print(f"colloc-kit: reference export: the run {run_dir} is still running and exported as it stands; export "
              "again once it ends", file=sys.stderr)


def export(source: Results | str | Path | Iterable[str | Path], name: str, facts: Mapping | None = None,
           root: str | Path | None = None) -> Path:
    """Write the reference set `name` under `root` (the package's reference folder by default) from loaded
    `Results` or from run folders (an experiment folder, a folder of them, or a list); replaces a set of that name.

    `facts`: what the README must say that the runs cannot: {"commands": [...], "left out": [...], "notes": ...};
    each value a string or a list of strings. Bad input (no runs, a bad name) is refused before anything is written.
    """
    if not isinstance(name, str) or safe_name(name) != name:
        raise BadInput(f"reference set name {name!r}: use letters, digits and . _ + = - only, e.g. h100-80gb")
    root = SHIPPED if root is None else check_folder(root, "reference folder (--to)", write=True)
    if isinstance(source, Results):
        results, sources = source, []
    else:
        sources = [source] if isinstance(source, (str, Path)) else list(source)
        results = load_runs([check_folder(s, "run folder", exists=True) for s in sources])
    _say_left_out(results)
    if results.runs.empty:
        where = ", ".join(map(str, sources)) or "the Results given"
        if results.broken:
            raise BadInput(f"no readable runs to export in {where}: every run there is broken (named above); move "
                           "them away or run them again, then export")
        raise BadInput(f"no runs to export (in {where}); give folders that hold run directories (manifest.json)")
    facts = {str(k): v for k, v in (facts or {}).items()}
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; a set is package data that everyone reads
    try:
        for table in TABLES:
            getattr(results, table).to_parquet(staging / f"{table}.parquet", compression=COMPRESSION, index=False)
        run_monitor(results).to_parquet(staging / f"{MONITOR}.parquet", compression=COMPRESSION, index=False)
        skipped = read_not_run(Path(d).parent for d in results.runs["run_dir"].dropna())
        skipped.to_parquet(staging / f"{NOT_RUN}.parquet", compression=COMPRESSION, index=False)
        (staging / README).write_text(render_readme(name, results, facts, sources, skipped), encoding="utf-8")
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def render_readme(name: str, results: Results, facts: Mapping, sources: list, skipped: pd.DataFrame) -> str:
    """The README of a set: the facts given, then what the runs record (machine, versions, dates, cells, failures)."""
    runs, jobs = results.runs, results.jobs
    lines = [f"# Reference data `{name}`", "",
             f"Exported {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by colloc-kit {__version__} "
             f"(commit {git_commit() or 'unknown'}) from {', '.join(map(str, sources)) or 'Results in memory'}.",
             f"Read it with `colloc_kit.reference.load({name!r})` (the frames `colloc_kit.load()` gives for the raw "
             "runs) and `colloc_kit.reference.monitor(...)` (per-run monitor summaries).", ""]
    listed = {key: list(value) if isinstance(value, (list, tuple)) else [value] for key, value in facts.items()}
    left_out = [v for key in list(listed) if key.lower() == "left out" for v in listed.pop(key)]
    for key, values in listed.items():
        lines += [f"## {key[:1].upper()}{key[1:]}", "", *(f"- {v}" for v in values), ""]
    lines += ["## Where and when", "", *(f"- {m}" for m in machines(runs)),
              f"- runs from {_utc(runs['started_at'].min())} to {_utc(runs['ended_at'].max())}", ""]
    lines += ["## The cells that ran", "", "| experiment | mode | copies | jobs | runs | complete |",
              "|---|---|---|---|---|---|"]
    mixes = jobs.groupby("run_id").apply(job_mix_label).rename("jobs") if len(jobs) else pd.Series(name="jobs")
    cells = runs.join(mixes, on="run_id").assign(done=runs["status"].eq("complete"))
    for keys, group in cells.groupby(["experiment", "mode_label", "copies", "jobs"], dropna=False, sort=True):
        lines.append("| " + " | ".join(map(str, keys)) + f" | {len(group)} | {int(group['done'].sum())} |")
    failed = jobs[jobs["status"] != "complete"] if len(jobs) else jobs
    lines += ["", "## Left out", "", *(f"- {v}" for v in left_out), "- the raw monitor series (`.samples`, "
              "`.host_samples`): `monitor.parquet` summarises them per run, and each job's row keeps its window's "
              "figures"]
    lines += [f"- a broken run, skipped: {path}: {problem}" for path, problem in results.broken.items()]
    lines += [f"- {row.experiment}: {row.cell} was not run: {row.why}" for row in skipped.itertuples()]
    if len(failed):
        kinds = failed.groupby(["experiment", "mode_label", "copies", "status"], dropna=False).size()
        lines += ["- jobs that did not complete (kept in the tables): " + "; ".join(
            f"{e} {m} x{c}: {n} {s}" for (e, m, c, s), n in kinds.items())]
    return "\n".join(lines) + "\n"


def machines(runs: pd.DataFrame) -> list[str]:
    """One line per machine description the runs' manifests name (or hold inline, as runs written before cells do):
    host, CPU, GPU, driver, CUDA, versions, commit."""
    seen: dict[Path, str] = {}
    for run_dir in runs["run_dir"].dropna().unique():
        try:
            machine = RunDir(run_dir).read_manifest().machine
            path = (Path(run_dir) / machine.description).resolve() if machine.description else None
            if path is None and "host" in machine.extra:
                seen[Path(run_dir)] = _machine_line(machine.extra)
            elif path is not None and path not in seen:
                seen[path] = _machine_line(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError, BrokenRun):  # a run or description unreadable: left out
            continue
    if seen:
        return sorted(set(seen.values()))
    names = ", ".join(sorted(runs["gpu_name"].dropna().astype(str).unique())) if "gpu_name" in runs else ""
    return [f"machine: the run folders were not at hand; GPU: {names or 'none recorded'}"]


def _machine_line(found: dict) -> str:
    host, gpus = found.get("host", {}), found.get("gpus") or []
    gpu = "; ".join(f"{g.get('name')} ({g.get('memory_mb', 0):,} MiB), driver {g.get('driver')}, CUDA "
                    f"{g.get('cuda_driver')}" for g in gpus) or f"no GPU ({found.get('gpu_reason')})"
    versions = ", ".join(f"{k} {v}" for k, v in (found.get("versions") or {}).items() if v)
    return (f"{host.get('hostname')}: {host.get('cpu')}, {host.get('logical_cores')} cores, "
            f"{host.get('memory_mb', 0):,} MiB; {gpu}; {versions}; commit {found.get('git_commit') or 'unknown'}")


def _of_run(frame: pd.DataFrame, run_id: str) -> pd.DataFrame:
    return frame[frame["run_id"] == run_id].drop(columns="run_id") if "run_id" in frame else pd.DataFrame()


def _span(*frames: pd.DataFrame) -> tuple[float, float] | None:
    times = [f["t"] for f in frames if "t" in f and len(f)]
    return (min(t.min() for t in times), max(t.max() for t in times)) if times else None


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds)) if pd.notna(seconds) else "unknown"

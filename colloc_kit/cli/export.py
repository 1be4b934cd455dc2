"""`colloc-kit export mlflow`: an experiment's cells as MLflow runs on a tracking server, where researchers compare
runs across machines and weeks.

    colloc-kit export mlflow runs/my-study --tracking-uri http://127.0.0.1:5000
    colloc-kit export mlflow runs --experiment-name lab-h100        (a folder of experiments, into one)
    colloc-kit export mlflow h100-80gb --tracking-uri http://127.0.0.1:5000    (a shipped reference set)

The source is an experiment folder (`<out>/<name>`), a folder of them, or a reference set (a shipped name or a folder
that `colloc-kit reference export` wrote: its tables only, no event logs or samples). One parent run per run folder,
one child run per job (`mlflow_records`); exporting again adds nothing that is there (`mlflow_log`). Exit 0, 1 where
a broken run was skipped (named on stderr), 2 for bad input (no runs, a server that does not answer), before anything
is written; 130 for Ctrl-C, within a second, with one line saying what was written and what not.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from colloc_kit import reference
from colloc_kit.analysis.results import load
from colloc_kit.cli.skipped import name_skipped
from colloc_kit.errors import BadInput
from colloc_kit.interrupts import exit_interrupted
from colloc_kit.paths import absolute
from colloc_kit.store.rundir import find_runs
from colloc_kit.tracking.log import ExportInterrupted, check, export

__all__ = ["add_subcommands", "main_export"]


def add_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `export mlflow` to the top-level subparsers."""
    parser = subparsers.add_parser("export", help="send runs elsewhere: mlflow (every cell as an MLflow run)")
    sub = parser.add_subparsers(dest="export_command", required=True)
    mlflow = sub.add_parser("mlflow", help="every cell as an MLflow run (its jobs as child runs) on a tracking "
                                           "server; pip install 'colloc-kit[mlflow]'")
    mlflow.add_argument("source", metavar="EXPERIMENT_FOLDER",
                        help="an experiment folder (<out>/<name>), a folder of them, or a reference set (e.g. "
                             f"{reference.DEFAULT})")
    mlflow.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"),
                        help="the tracking server, e.g. http://127.0.0.1:5000 (default: $MLFLOW_TRACKING_URI)")
    mlflow.add_argument("--experiment-name", help="the MLflow experiment for every run (default: each run's "
                                                  "experiment's name)")
    mlflow.add_argument("--samples", action="store_true",
                        help="also upload each run's monitor samples (Parquet) as artifacts")
    mlflow.add_argument("--strict", action="store_true", help="refuse at the first broken run instead of skipping it")
    parser.set_defaults(handler=main_export)
    return parser


def main_export(args: argparse.Namespace) -> int:
    """`colloc-kit export mlflow`: check the source and the server, read the runs, write them; the exit code. Ctrl-C
    ends the process at once (`exit_interrupted`, 130): the interpreter's usual exit, tearing down MLflow, SQLAlchemy
    and pandas, takes seconds on a busy machine, and the writers are daemon threads, stopped already."""
    try:
        return _export(args)
    except ExportInterrupted as exc:
        exit_interrupted(str(exc))
    except KeyboardInterrupt:
        exit_interrupted(f"interrupted; no run was written to MLflow at {args.tracking_uri}")


def _export(args: argparse.Namespace) -> int:
    """The export itself: bad input refused before anything is written; the exit code."""
    if not args.tracking_uri:
        raise BadInput("give the tracking server with --tracking-uri (e.g. http://127.0.0.1:5000) or set "
                       "MLFLOW_TRACKING_URI")
    read, source = _source(args.source, args.strict)
    check(args.tracking_uri)  # before reading what may be many runs
    results = read()
    skipped = name_skipped(results)
    if results.runs.empty:
        raise BadInput(f"no readable runs under {args.source}; nothing was exported")
    print(export(results, args.tracking_uri, args.experiment_name, samples=args.samples, source=source))
    return 1 if skipped else 0


def _source(name: str, strict: bool) -> tuple[Callable[[], Any], str]:
    """How to read the runs `name` names (a function, so that the server is checked first) and a word for it."""
    path = absolute(name)
    shipped = ", ".join(reference.available()) or "none in this install"
    if path.is_dir() and (path / "runs.parquet").is_file():
        return (lambda: reference.load(path)), f"reference set {path.resolve()}"
    if path.is_dir():
        if not find_runs(path):
            raise BadInput(f"no runs (manifest.json) under {name}; give an experiment folder (<out>/<name>) that "
                           f"`colloc-kit run` wrote, a folder of them, or a reference set ({shipped})")
        return (lambda: load(path, strict=strict)), str(path.resolve())
    if name in reference.available():
        return (lambda: reference.load(name)), f"reference set {name} (colloc-kit)"
    raise BadInput(f"{name} is neither a folder nor a shipped reference set ({shipped}); give an experiment folder "
                   "such as runs/my-study")

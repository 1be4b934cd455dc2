"""One rule for every command that reads runs (`show`, `status`, `run --plan`, `advise --runs`, `export mlflow`,
`reference export`): whatever it skips or cannot read, it names on stderr, one line each, with what is wrong.

    >>> name_skipped(load("runs"))          # doctest: +SKIP
    colloc-kit: skipped the broken run runs/exp/20261123-004941-naive-x1-r0: .../manifest.json cannot be read as JSON
    1
"""

from __future__ import annotations

import sys

from colloc_kit.analysis.results import Results
from colloc_kit.errors import shorten
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["name_damaged", "name_skipped"]


def name_skipped(results: Results) -> int:
    """One line per run `load` skipped (broken) or read in part (damaged monitor files); how many."""
    lines = results.skipped()
    for line in lines:
        print(f"colloc-kit: {shorten(line)}", file=sys.stderr)
    return len(lines)


def name_damaged(folder: ExperimentFolder, prefix: str = "") -> int:
    """One line per thing in an experiment folder that cannot be read (`ExperimentFolder.damaged`); how many."""
    problems = folder.damaged()
    for problem in problems:
        print(f"colloc-kit: {prefix}{shorten(problem)}", file=sys.stderr)
    return len(problems)

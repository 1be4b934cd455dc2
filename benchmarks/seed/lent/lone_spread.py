"""What a loader-bound lone baseline's swing costs (issue 50): per workload of seed folders, its lone runs as
configured (`lone_neighbours.runs_of`: the series `exclusive-x1`), their spread (coefficient of variation of images/s)
and how many such runs a 95 % CI of ±7 % would need at that spread (Student's t over n runs, as `stats.ci95`).

    python3 benchmarks/seed/lent/lone_spread.py RUNS29/seed-33 RUNS30/seed-33 > lone-spread.md
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from lone_neighbours import runs_of  # a sibling: the seed folder's runs
from scipy import stats

from colloc_kit.stats import CI_LEVEL

__all__ = ["main", "runs_needed"]


def runs_needed(spread: float, target: float = 0.07) -> int:
    """The fewest runs whose 95 % CI half-width, at coefficient of variation `spread`, is within `target`.

    >>> runs_needed(0.092), runs_needed(0.033)
    (10, 4)
    """
    return next(n for n in range(2, 10_000) if stats.t.ppf(0.5 + CI_LEVEL / 2, n - 1) * spread / math.sqrt(n) <= target)


def main(argv: list[str]) -> int:
    print("| set | workload | lone runs | spread (CV) | runs for ±7 % |\n|---|---|---|---|---|")
    for folder in map(Path, argv):
        runs = runs_of(folder)
        for model, lone in runs[runs["series"] == "exclusive-x1"].groupby("model"):
            rates = lone["images_per_s"]
            spread = rates.std() / rates.mean()
            print(f"| {folder} | {model} | {len(rates)} | {spread:.1%} | {runs_needed(spread)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

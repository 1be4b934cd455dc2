"""A seed folder's GPU-only twins measured both ways (issue 50, feed swaps): per workload and twin series (mode,
copies), the images/s of its twins swapped on their cell's launch (`--feed-swaps`; a series whose first window says
`feed_from`) against those launched afresh (another series of the same twin: another id), each mean ± 95 % CI, and
their ratio. Session 28's run has both for the x1 modes (the fresh ones its lone repeats started, since mended).

    python3 benchmarks/seed/lent/twins_ab.py RUNS/seed-33 > twins-ab.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from lone_neighbours import runs_of  # a sibling: the seed folder's runs, read once for both benchmarks

from colloc_kit.stats import ci95
from colloc_kit.views.tables import table

__all__ = ["main", "twins"]


def twins(folder: Path) -> pd.DataFrame:
    """One row per complete GPU-only twin run (`lone_neighbours.runs_of`): workload, twin (`series`), its cell's
    fingerprint, start, images/s, and whether its fingerprint's series was swapped on its cell's launch."""
    runs = runs_of(folder)
    runs = runs[runs["series"].str.startswith("gpu-only-")]
    return runs.assign(swapped=runs["fingerprint"].isin(set(runs.loc[runs["swapped"], "fingerprint"])))


def _mean_ci(values: pd.Series) -> str:
    mean, half = ci95(values)
    return f"{mean:,.0f} ± {half:,.0f} ({len(values)})"


def main(argv: list[str]) -> int:
    """Print the table of the twins measured both ways (markdown)."""
    runs = twins(Path(argv[0]))
    rows = []
    for (model, twin), part in runs.groupby(["model", "series"]):
        swapped, fresh = part[part["swapped"]], part[~part["swapped"]]
        if len(swapped) and len(fresh):
            swapped_rate, fresh_rate = swapped["images_per_s"], fresh["images_per_s"]
            rows.append({"model": model, "twin": twin, "swapped images/s (runs)": _mean_ci(swapped_rate),
                         "fresh images/s (runs)": _mean_ci(fresh_rate),
                         "swapped over fresh": f"{swapped_rate.mean() / fresh_rate.mean() - 1:+.2%}",
                         "fresh started (min after the last swapped)":
                             (fresh["start"].min() - swapped["start"].max()) / 60})
    print(table(pd.DataFrame(rows)).to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

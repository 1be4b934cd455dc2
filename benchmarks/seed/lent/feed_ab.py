"""Issue 50's feed-swap A/B, read (`feed_ab.sh` ran it): per pass folder (1-warm, 2-swap, 3-warm, 4-swap) and cell
series, the repeats' images/s (mean ± 95 % CI) and how each window was launched (`cell_phases`: warm, first / later /
swapped), its median wall time; then per series the swap passes against the warm passes (the repeats pooled: the
swapped twins' images/s over the fresh ones', and the GPU-only gain of the collocated cells), and each pass's wall
time (first start to last end, its experiments together).

    python3 benchmarks/seed/lent/feed_ab.py /tmp/feed-ab > feed-ab.md
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.analysis.summaries import run_summary
from colloc_kit.stats import ci95
from colloc_kit.views.tables import table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # a sibling benchmark's reader
from cell_phases import cell_phases  # noqa: E402

__all__ = ["arms", "main", "passes"]


def passes(root: Path) -> pd.DataFrame:
    """One row per complete run of every pass under `root`: its pass (`1-warm`: its arm `warm`), series (mode, copies,
    baseline), images/s, GPU-only gain, launch kind and wall time."""
    frames = []
    for experiment in sorted(p for p in root.glob("*/*") if (p / "specs").is_dir()):
        runs = run_summary(colloc_kit.load(experiment))
        phases = pd.DataFrame(cell_phases(experiment)).rename(columns={"run": "run_id"})
        if runs.empty or phases.empty:
            continue
        frames.append(runs.merge(phases[["run_id", "launch", "wall_s", "started_at", "ended_at"]], on="run_id")
                      .assign(pass_=experiment.parent.name, arm=experiment.parent.name.split("-", 1)[-1],
                              series=lambda d: d["baseline"].fillna("study").astype(str) + " " + d["mode_label"]
                              + " x" + d["copies"].astype(str)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _mean_ci(values: pd.Series, digits: int = 0) -> str:
    mean, half = ci95(values)
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}" if half == half else f"{mean:,.{digits}f}"


def arms(runs: pd.DataFrame) -> pd.DataFrame:
    """Per series the swap arm against the warm arm, the repeats of their passes pooled: images/s of each, their
    ratio, and the GPU-only gain of each (the collocated twins').

    >>> runs = pd.DataFrame({"series": ["t"] * 4, "arm": ["warm", "warm", "swap", "swap"],
    ...                      "aggregate_images_per_s": [100.0, 102.0, 101.0, 103.0], "gpu_only_gain": [None] * 4})
    >>> arms(runs)[["series", "swap_over_warm"]].to_dict("records")
    [{'series': 't', 'swap_over_warm': 1.0099}]
    """
    rows = []
    for series, part in runs.groupby("series"):
        by_arm = {arm: part[part["arm"] == arm] for arm in ("warm", "swap")}
        means = {arm: rows_["aggregate_images_per_s"].mean() for arm, rows_ in by_arm.items()}
        rows.append({"series": series, **{f"{arm} images/s": _mean_ci(r["aggregate_images_per_s"])
                                          for arm, r in by_arm.items()},
                     "swap_over_warm": round(means["swap"] / means["warm"], 4),
                     **{f"{arm} GPU-only gain": _mean_ci(r["gpu_only_gain"].dropna(), 3)
                        for arm, r in by_arm.items() if r["gpu_only_gain"].notna().any()}})
    return pd.DataFrame(rows)


def main(argv: list[str]) -> int:
    runs = passes(Path(argv[0]))
    if runs.empty:
        print(f"no complete runs under {argv[0]}")
        return 1
    per_pass = runs.groupby(["pass_", "series"]).agg(
        repeats=("run_id", "size"), images_per_s=("aggregate_images_per_s", _mean_ci),
        launches=("launch", lambda s: "; ".join(f"{k}: {v}" for k, v in s.value_counts().sort_index().items())),
        wall_s=("wall_s", lambda s: round(statistics.median(s), 1))).reset_index()
    walls = runs.groupby("pass_").agg(cells=("run_id", "size"), first=("started_at", "min"), last=("ended_at", "max"))
    walls["wall_s"] = (walls["last"] - walls["first"]).round(1)
    print("## Per pass and series\n")
    print(table(per_pass.rename(columns={"pass_": "pass"})).to_markdown())
    print("\n## Swap passes against warm passes (repeats pooled)\n")
    print(table(arms(runs)).to_markdown())
    print("\n## Each pass's wall time (its experiments together)\n")
    print(table(walls[["cells", "wall_s"]].reset_index().rename(columns={"pass_": "pass"})).to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Why a loader-bound lone run's rate swings (issue 50): per lone run of a seed folder that reads a dataset (as
configured, host-matched; not GPU-only), its images/s beside what the host did during its window: the loader workers
of the other lanes' runs that overlapped it (summed over their jobs, weighted by the overlap), the host's CPU use,
steal and clock (`samples_host`) and the job's own CPU (`samples_host_job`, in cores; and, where the monitor recorded
them, the distinct cores its processes were on); then, per workload and
series (and pooled over a workload's lone runs as configured), the rank correlation of the rate with each.

    python3 benchmarks/seed/lent/lone_neighbours.py RUNS/seed-33 > lone-neighbours.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.analysis.summaries import run_summary
from colloc_kit.views.tables import table

__all__ = ["lone_runs", "main", "overlapping_workers", "runs_of"]

HOST = ["neighbour_workers", "host_cpu_pct", "steal_pct", "clock_mhz", "job_cores", "cores_apart"]


def runs_of(folder: Path) -> pd.DataFrame:
    """One row per complete run: its id, GPU, span, measured window (the last job's release to the first job's end),
    loader workers (synthetic feeds have none), copies, series (its id without the time stamp and repeat), its cell's
    fingerprint, whether its window swapped a launch's feed (`swapped`) and its images/s (`run_summary`)."""
    rates = run_summary(colloc_kit.load(folder)).set_index("run_id")["aggregate_images_per_s"]
    rows = []
    for path in sorted(p for p in folder.iterdir() if (p / "manifest.json").is_file()):
        manifest = json.loads((path / "manifest.json").read_text())
        if manifest.get("status") != "complete":
            continue
        outcomes = [j["outcome"] for j in manifest["jobs"]]
        rows.append({"run_id": manifest["run_id"], "path": path, "gpu": manifest["gpu"],
                     "start": manifest["started_at"], "end": manifest["ended_at"],
                     "window_start": max(o["released_at"] for o in outcomes),
                     "window_end": min(o["ended_at"] for o in outcomes), "copies": manifest["copies"],
                     "workers": sum(j["spec"]["workers"] for j in manifest["jobs"]
                                    if j["spec"]["dataset"] != "synthetic"),
                     "series": _series(manifest["run_id"]), "fingerprint": manifest["cell_id"].rsplit("-", 1)[1],
                     "swapped": "feed_from" in (manifest.get("warm") or {}),
                     "model": manifest["jobs"][0]["spec"]["model"].removeprefix("timm."),
                     "images_per_s": rates.get(manifest["run_id"])})
    return pd.DataFrame(rows)


def _series(run_id: str) -> str:
    """A run's series: its id without the time stamp and the repeat.

    >>> _series("20261129-163923-host-matched-w8-exclusive-x1-r0")
    'host-matched-w8-exclusive-x1'
    """
    return run_id.split("-", 2)[2].rsplit("-r", 1)[0]


def overlapping_workers(runs: pd.DataFrame, start: float, end: float, gpu: int) -> float:
    """Loader workers of the runs on other GPUs, each weighted by the share of [start, end] it overlapped.

    >>> runs = pd.DataFrame({"gpu": [1, 1], "start": [0.0, 5.0], "end": [5.0, 10.0], "workers": [28, 4]})
    >>> overlapping_workers(runs, 0.0, 10.0, gpu=0)
    16.0
    """
    other = runs[runs["gpu"] != gpu]
    shared = (other["end"].clip(upper=end) - other["start"].clip(lower=start)).clip(lower=0)
    return float((other["workers"] * shared).sum() / (end - start))


def lone_runs(folder: Path) -> pd.DataFrame:
    """One row per complete lone run that reads a dataset: workload, series, start, images/s and its window's host."""
    runs = runs_of(folder)
    rows = []
    for _, run in runs[(runs["copies"] == 1) & (runs["workers"] > 0)].iterrows():
        start, end = run["window_start"], run["window_end"]
        host = pd.read_parquet(run["path"] / "monitor" / "samples_host.parquet").query("@start <= t <= @end")
        job = pd.read_parquet(run["path"] / "monitor" / "samples_host_job.parquet").query("@start <= t <= @end")
        rows.append({"model": run["model"], "series": run["series"], "gpu": run["gpu"], "start": start,
                     "images_per_s": run["images_per_s"],
                     "neighbour_workers": overlapping_workers(runs, start, end, run["gpu"]),
                     "host_cpu_pct": host["cpu_util_pct"].mean(), "steal_pct": host["cpu_steal_pct"].mean(),
                     "clock_mhz": host["cpu_freq_mhz"].mean(), "job_cores": job["cpu_core_pct"].mean() / 100,
                     "cores_apart": job["cores"].mean() if "cores" in job else None})  # recorded since session 28
    return (pd.DataFrame(rows).dropna(axis="columns", how="all").sort_values(["model", "series", "start"])
            .reset_index(drop=True))


def _spread(values: pd.Series) -> float:
    """(max - min) / mean, in %."""
    return float((values.max() - values.min()) / values.mean() * 100)


def _rank_correlation(a: pd.Series, b: pd.Series) -> str:
    """Spearman's rho as text; "constant" where `b` does not vary (the host's clock, as a VM reports it).

    >>> _rank_correlation(pd.Series([1.0, 2.0, 3.0]), pd.Series([2.0, 2.0, 2.0]))
    'constant'
    """
    return "constant" if b.nunique() < 2 else f"{a.corr(b, method='spearman'):+.2f}"


def main(argv: list[str]) -> int:
    """Print the lone runs' table and the correlations (markdown)."""
    lone = lone_runs(Path(argv[0]))
    t0 = lone["start"].min()
    shown = lone.assign(minute=lambda d: ((d["start"] - t0) / 60).round(1)).drop(columns="start")
    print(table(shown).to_markdown())
    print("\nSpearman's rank correlation of images/s with each, per workload's series of 3 or more runs:\n")
    rows = [{"model": m, "series": s, "runs": len(part), "images/s spread (%)": _spread(part["images_per_s"]),
             **{c: _rank_correlation(part["images_per_s"], part[c]) for c in HOST if c in lone}}
            for (m, s), part in lone.groupby(["model", "series"]) if len(part) >= 3]
    print(table(pd.DataFrame(rows)).to_markdown())
    print("\nThe same, pooled per workload over its lone runs as configured (every mode: one job, its 4 workers), with"
          " images/s per core of the job's own CPU:\n")
    configured = lone[~lone["series"].str.startswith("host-matched")]
    pooled = [{"model": m, "runs": len(part), "images/s spread (%)": _spread(part["images_per_s"]),
               **{c: _rank_correlation(part["images_per_s"], part[c]) for c in HOST if c in lone},
               "minute": _rank_correlation(part["images_per_s"], part["start"]),
               "images/s per core": f"{(part['images_per_s'] / part['job_cores']).min():,.0f}"
                                    f"-{(part['images_per_s'] / part['job_cores']).max():,.0f}",
               "cores used": f"{part['job_cores'].min():.2f}-{part['job_cores'].max():.2f}"}
              for m, part in configured.groupby("model")]
    print(table(pd.DataFrame(pooled)).to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

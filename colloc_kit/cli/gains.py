"""The gains table `colloc-kit run` and `show` print under their runs and jobs: each configuration's study's gain
over one job alone split into the GPU's part and the host's part (`analysis.attribution`), the GPU-only gain beside
them, and the noise warning the notebooks give.

    >>> GAIN_COLUMNS[3:5]
    ['study_gain_mean', 'study_gain_ci']
"""

from __future__ import annotations

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.attribution import study_cells
from colloc_kit.analysis.greying import greyed
from colloc_kit.analysis.results import Results
from colloc_kit.views.tables import table

__all__ = ["GAIN_COLUMNS", "print_gains"]

GAIN_COLUMNS = ["mode_label", "copies", "jobs_label", "study_gain_mean", "study_gain_ci", "gpu_part_mean",
                "gpu_part_ci", "host_part_mean", "host_part_ci", "gpu_only_gain_mean", "gpu_only_gain_ci",
                "epoch_time_growth_mean", "bound_by", "repeats", "flags", "attribution_note"]


def print_gains(results: Results) -> None:
    """Each configuration's gain over one job alone (with its CI, its split and each job's epoch-time growth), and
    the noise warning the notebooks give where identical jobs disagree or a gain exceeds what its jobs can give."""
    summary = analysis.summarize(results)
    shown = study_cells(summary)
    shown = shown[shown["normalized_throughput_mean"].notna()] if len(shown) else shown
    if len(shown):
        print("\ngains (x one job alone; 95 % CI)\n" + table(shown, GAIN_COLUMNS).to_text())
    noise = greyed(analysis.with_baselines(results.jobs), summary) if len(results.jobs) else None
    if noise:
        print(f"\nwarning: {noise}")

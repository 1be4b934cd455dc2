"""What `colloc_kit.analysis` offers, for type checkers and for lazy_loader.attach_stub (see __init__.py)."""

from . import attribution, fairness, figures, latency, lone, results, summaries
from .summaries import (
    BASELINE_KEYS,
    COMPLETE,
    GROUP_KEYS,
    NOISE_LIMIT,
    RUN_KEYS,
    RUN_METRICS,
    UTILIZATION,
    WITH_CI,
    WORKLOAD,
    baselines,
    complete,
    data_name,
    in_figures,
    job_mix_label,
    job_summary,
    measured_rate,
    memory_fit,
    noise,
    run_summary,
    summarize,
    with_baselines,
    workload_label,
)

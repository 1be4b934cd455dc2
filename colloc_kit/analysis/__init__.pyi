"""What `colloc_kit.analysis` offers, for type checkers and for lazy_loader.attach_stub (see __init__.py); a stub
re-exports only names imported `as` themselves, hence `X as X` (summaries' `__all__`)."""

from . import attribution, fairness, figures, greying, latency, lone, results, summaries
from .greying import greyed as greyed
from .summaries import (
    BASELINE_KEYS as BASELINE_KEYS,
    COMPLETE as COMPLETE,
    GROUP_KEYS as GROUP_KEYS,
    NOISE_LIMIT as NOISE_LIMIT,
    RUN_KEYS as RUN_KEYS,
    RUN_METRICS as RUN_METRICS,
    UTILIZATION as UTILIZATION,
    WITH_CI as WITH_CI,
    WORKLOAD as WORKLOAD,
    baselines as baselines,
    complete as complete,
    data_name as data_name,
    in_figures as in_figures,
    job_mix_label as job_mix_label,
    job_summary as job_summary,
    measured_rate as measured_rate,
    memory_fit as memory_fit,
    mix_of as mix_of,
    impossible_gain as impossible_gain,
    noise as noise,
    run_summary as run_summary,
    summarize as summarize,
    summarize_runs as summarize_runs,
    with_baselines as with_baselines,
    workload_label as workload_label,
    workloads_by_run as workloads_by_run,
)


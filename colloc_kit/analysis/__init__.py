"""The read side's arithmetic: every figure defined once, runs read back into frames, baselines, fairness, summaries.

    figures      every figure the kit reports, defined once (windows, rates, CIs, flags, bound by); a run's: `of_run`
    records      one run's records in one call (`read`): `RunFigures` with a `JobFigures` per job, a `JobRow` per job
    results      runs read back into frames (`load`, `combine`, `Results`), with baselines and fairness joined
    latency      an inference job's figures: latency percentiles with CIs, requests/s, SLO share, starved jobs
    lone         each job's lone baseline and what is measured against it (relative throughput, slowdown)
    fairness     Jain's index, who lost when jobs shared, shares asked against shares had
    attribution  every gain split: the GPU's part and the host's part (three lone baselines), the GPU-only gain
    greying      the one noise rule: a page greyed only where its differences lie within the noise; impossible numbers
    summaries    summaries with CIs and baselines (`run_summary`, `summarize`, ...; `colloc_kit.analysis.X`)

    >>> from colloc_kit import analysis
    >>> analysis.run_summary.__module__
    'colloc_kit.analysis.summaries'
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

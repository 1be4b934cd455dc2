"""MIG: the profile catalogue, an exact layout planner, a simulated NVML, and applying/restoring layouts.

    >>> from colloc_kit.mig import plan
    >>> [(a.profile.name, a.start) for a in plan("3g,2g,1g,1g", "H100-80GB").instances]   # doctest: +SKIP
    [('3g.40gb', 0), ('2g.20gb', 4), ('1g.10gb', 6), ...]
"""

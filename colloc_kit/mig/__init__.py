"""MIG: the profile catalogue, an exact layout planner, a simulated NVML, and applying/restoring layouts.

    >>> from colloc_kit.mig.planner import plan
    >>> [i.label() for i in plan("4g,2g,1g", "A100-40GB").instances]
    ['4g.20gb@0', '2g.10gb@4', '1g.5gb@6']
"""

"""The bundled experiment specs (`*.yaml`, run by name: `colloc-kit run cpu-smoke`) and the seed study's experiments
33-37 as the kit runs them on the GPU present (`seed`).

    seed         `SeedSpec`: the study's matrix for this GPU, what fits and what does not, and why
    seed_run     `run`: the study's cells run, lone cells first; a cell whose jobs cannot fit in memory named, not run

    >>> from colloc_kit.experiments import seed
    >>> seed.__name__
    'colloc_kit.experiments.seed'
"""

__all__ = ["seed", "seed_run"]

"""What to run: a job (one training process), a sharing mode, and an experiment (jobs x modes x copies x repeats).

    job          `JobSpec`: one training job, the one schema behind the CLI, the worker and YAML; `with_changes`
    experiment   `ModeSpec`, `ExperimentSpec`: job groups x modes x copies x repeats, and where the cells run
    checks       the value checks, and how a refusal quotes a value (`require`, `excerpt`)
    yaml_files   safe YAML: a spec file (or a bundled spec's name) read into a mapping
    baselines    the lone baselines a spec may ask for (`baselines:`) and their precision

Specs are plain dataclasses, validated when built, so bad input is refused before anything starts::

    >>> job = JobSpec(model="resnet18", batch_size=64, steps=200, amp="bf16")
    >>> spec = ExperimentSpec(jobs=[job], modes=[ModeSpec("naive")], copies=[1, 2, 4], repeats=3)
    >>> spec = ExperimentSpec.from_yaml("experiment.yaml")      # doctest: +SKIP

A YAML spec::

    name: resnet-collocation
    device: cuda
    modes: [exclusive, naive, {name: mps, thread_percentage: 50}]
    copies: [1, 2, 4]
    repeats: 3
    placement: pinned          # pinned (default): a block of cores per job; unpinned: as the OS schedules them
    gpus: [0, 1]               # optional: cells spread over these GPUs (or: all); or instead
    # slurm: {partition: gpu, time_min: 30}   # one Slurm array task per cell (pip install colloc-kit[slurm])
    # mlflow: http://127.0.0.1:5000   # also log each cell to this MLflow server (pip install colloc-kit[mlflow])
    jobs:                      # job groups; each group is started `copies` times
      - {model: resnet18, batch_size: 64, amp: bf16, steps: 300}
"""

from colloc_kit.spec.experiment import MAX_JOBS_PER_RUN, PLACEMENTS, ExperimentSpec, ModeSpec
from colloc_kit.spec.job import AMP_CHOICES, FEED_FIELDS, RECIPE_DEFAULTS, JobSpec, with_changes

__all__ = ["AMP_CHOICES", "ExperimentSpec", "FEED_FIELDS", "JobSpec", "MAX_JOBS_PER_RUN", "ModeSpec", "PLACEMENTS",
           "RECIPE_DEFAULTS", "with_changes"]

"""The two modes that change nothing on the GPU: `exclusive` (the baseline) and `naive` (time-slicing).

    >>> ExclusiveMode(workdir=".", gpu=0).sequential
    True
"""

from __future__ import annotations

from ..mps import default_pipe_daemons, refuse_running_daemons
from ..nvml import require_gpu_index
from .base import SharingMode


class _PlainMode(SharingMode):
    """A mode whose jobs are plain CUDA clients: refused while an MPS daemon serves the default pipe directory,
    since the jobs would join it and measure MPS instead."""

    def check(self, n_jobs: int) -> None:
        if self.device == "cuda":
            require_gpu_index(self.gpu)
            refuse_running_daemons(default_pipe_daemons(), mode=self.name)

    def __enter__(self) -> "_PlainMode":
        self.check(1)
        return self


class ExclusiveMode(_PlainMode):
    """Jobs one after another, each alone on the GPU: the baseline every sharing mode is compared with."""

    name = "exclusive"
    sequential = True


class NaiveMode(_PlainMode):
    """All jobs at once on one GPU; the driver time-slices between their contexts."""

    name = "naive"

    @classmethod
    def alone(cls, n_jobs: int) -> bool:
        return n_jobs == 1  # one job time-sliced with nothing is a job alone

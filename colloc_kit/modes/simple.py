"""The two modes that change nothing on the GPU, `exclusive` (the baseline) and `naive` (time-slicing), and the
building block they share: `PlainCudaMode`, whose jobs are plain CUDA clients.

    >>> ExclusiveMode(workdir=".", gpu=0).sequential
    True
"""

from __future__ import annotations

from colloc_kit.gpu.mps_detect import default_pipe_daemons, describe_daemons, refuse_running_daemons
from colloc_kit.gpu.nvml import require_gpu_index
from colloc_kit.modes.base import SharingMode

__all__ = ["ExclusiveMode", "NaiveMode", "PlainCudaMode"]


class PlainCudaMode(SharingMode):
    """A mode whose jobs are plain CUDA clients: refused while an MPS daemon serves the default pipe directory
    (/tmp/nvidia-mps), since the jobs would join it and measure MPS instead. Subclass it (with a `name`) for a mode
    of your own that only changes the jobs' environment.

    >>> class Capped(PlainCudaMode):                                                        # doctest: +SKIP
    ...     '''All jobs at once, each with one hardware work queue.'''
    ...     name = "capped"
    ...     def slots(self, n_jobs):
    ...         return [Slot(s.label, {**s.env, "CUDA_DEVICE_MAX_CONNECTIONS": "1"}) for s in super().slots(n_jobs)]
    """

    def check(self, n_jobs: int) -> None:
        """Refuse a GPU this machine lacks, and a default-pipe MPS daemon, before anything starts."""
        if self.device == "cuda":
            require_gpu_index(self.gpu)
            refuse_running_daemons(default_pipe_daemons(), mode=self.name)

    @classmethod
    def unavailable_here(cls, device: str = "cuda", gpu: int = 0) -> str | None:
        """Why not here: an MPS daemon serving the default pipe directory (on the CPU, nothing)."""
        daemons = default_pipe_daemons() if device == "cuda" else []
        return f"an MPS daemon serves the default pipe directory ({describe_daemons(daemons)})" if daemons else None

    def __enter__(self) -> "PlainCudaMode":
        self.check(1)
        return self


class ExclusiveMode(PlainCudaMode):
    """Jobs one after another, each alone on the GPU: the baseline every sharing mode is compared with."""

    name = "exclusive"
    sequential = True


class NaiveMode(PlainCudaMode):
    """All jobs at once on one GPU; the driver time-slices between their contexts."""

    name = "naive"

    @classmethod
    def alone(cls, n_jobs: int) -> bool:
        """One job time-sliced with nothing is a job alone."""
        return n_jobs == 1

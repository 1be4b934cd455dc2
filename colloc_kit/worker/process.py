"""What a worker knows of its own process: when it started, its peak memory, the host cores it and its loader
workers were seen running on (the placement it actually had, whatever it was allowed), which start it takes, and the
GPU work it waits for before it ends.

    >>> seen = cores_seen()
    >>> bool(seen) and seen <= set(range(os.cpu_count() or 1))
    True
"""

from __future__ import annotations

import os
import resource
import sys
import time

import psutil

from colloc_kit import events

__all__ = ["QUICK_START", "cores_seen", "peak_rss_mb", "quick_start", "settle_gpu", "started_at"]

QUICK_START = "COLLOC_KIT_QUICK_START"  # 0: a cell starts the old way (benchmarks/scaling/scaling.py's A/B), else quick


def started_at() -> float:
    """When this process started (was forked, for one forked from the zygote), on the kit's clock, to a clock tick
    (psutil's create_time can be a second off: it adds whole seconds of boot time)."""
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime: clock ticks after boot
    return events.now() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))


def quick_start() -> bool:
    """Whether a cell starts the quick way (the default): a worker's loader starts on its first batch before its model
    builds, and a lane reads a cell back while its next cell starts. `COLLOC_KIT_QUICK_START=0` keeps the old order,
    so that `benchmarks/scaling/scaling.py --ab` can set the two side by side on one machine; the figures are the same.

    >>> quick_start() == (os.environ.get(QUICK_START, "1") != "0")
    True
    """
    return os.environ.get(QUICK_START, "1") != "0"


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (data-loader processes not included)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 2 ** 10


def cores_seen() -> set[int]:
    """The cores this process's threads and those of its children (loader workers) last ran on: field 39 of each
    thread's /proc stat. Sampled once per progress interval, the union is where the job ran."""
    pids = [os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))]
    seen = set()
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # a loader worker that just left
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                    seen.add(int(stat.read().rsplit(")", 1)[1].split()[36]))
            except (OSError, IndexError, ValueError):
                continue
    return seen


def settle_gpu() -> None:
    """Wait until the GPU has run what this process queued, before it ends. A training step returns once its kernels
    are queued, so a job leaving its hold (stdin closed: a warm launch's close) had 0.2-0.44 s of work in flight on
    the H200 (ResNet-26/50 on synthetic data, which never waits for a batch). Under MPS such an exit was followed,
    0.14-0.33 s later, by a fatal GPU error in a client still training, which the server answers by tearing down every
    client (benchmarks/results/h200/mps-teardown). A CUDA error already raised (a sticky one) leaves nothing to wait
    for; without CUDA, or with torch never loaded, this does nothing.

        >>> settle_gpu()  # no GPU work queued here: returns at once
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:  # the device already failed (its error reported where it arose): leave all the same
        pass

"""Warm repeats (`ExperimentSpec.warm_repeats`): a cell's repeats measured as consecutive windows of one launch of its
jobs, which build, load and prime (cuDNN's autotuning) once. The lane keeps the launch of its last cell (`Kept`):
its mode entered, its jobs paused after a complete window, training on (held) so that the next window needs no
warm-up; the next repeat of the same cell (`Cell.series`) takes it over (`Wave.again`), and with feed swaps
(`ExperimentSpec.feed_swaps`) so does the GPU-only twin of its cell (`Cell.feed_from`), its jobs' feed swapped; any
other cell, a failed window, a job that failed since or the lane's end closes it (jobs stopped, mode left). Each
window is a run of its own, whose manifest says which launch and window it was, and the run whose feed a swap
replaced (`store.manifest.WarmWindow`).

A held server (`role: serve`) idles instead and warms up again in each window (`worker.serve`). Between a launch's
windows, while its jobs are held, `between_windows` lets this process run something of its own (a benchmark's other
arm, measured in the same host state seconds apart).

    >>> kept = Kept()
    >>> kept.take("naive-x2-0123456789") is None       # nothing kept yet: the cell starts a launch of its own
    True
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import psutil

from colloc_kit.modes.base import SharingMode
from colloc_kit.pipeline.launcher import Wave
from colloc_kit.store.manifest import SlotRecord

__all__ = ["Kept", "Launch", "between_windows", "jobs_cpu_s", "run_between"]


@dataclass
class Launch:
    """One launch of a cell's jobs: the series it serves, its mode (entered: `stack` leaves it), its wave of jobs,
    the slots they sit in, its first run, how many windows it measured and its last window's run (None: the first)."""

    series: str
    mode: SharingMode
    stack: contextlib.ExitStack
    wave: Wave
    slots: list[SlotRecord]
    first_run: str
    windows: int = 1
    last_run: str | None = None

    def close(self) -> None:
        """Its jobs ended (stdin closed, then stopped), then its mode left."""
        try:
            self.wave.close()
        finally:
            self.stack.close()


class Kept:
    """The launch a lane keeps between cells (at most one: one GPU runs one cell at a time)."""

    def __init__(self) -> None:
        self.launch: Launch | None = None

    def take(self, series: str, feed_from: str | None = None) -> Launch | None:
        """The kept launch if it serves `series` or `feed_from` (the series a cell may take over, its feed swapped:
        `Cell.feed_from`), and its jobs all still run (taken: the caller keeps it again, or closes it); any other is
        closed first, so the GPU is free for the cell."""
        launch, self.launch = self.launch, None
        if launch is not None and (launch.series not in (series, feed_from) or not launch.wave.whole()):
            launch.close()
            return None
        return launch

    def keep(self, launch: Launch) -> None:
        """Keep `launch` for the next cell (one kept before it is closed)."""
        self.close()
        self.launch = launch

    def close(self) -> None:
        """Close the kept launch, if any: the GPU is free."""
        launch, self.launch = self.launch, None
        if launch is not None:
            launch.close()


_BETWEEN: list[Callable[[int], None]] = []  # the open `between_windows` blocks' calls, innermost last


@contextlib.contextmanager
def between_windows(call: Callable[[int], None]) -> Iterator[None]:
    """Inside the block, `call(window)` runs before each later window of a launch (`window`: its index, 1 on) of the
    lanes in this process, while the launch's jobs are held and before the window's run starts (lanes of several GPUs
    run in processes of their own: not theirs). The inference benchmark times its plain loop so, between the kit's
    server's windows.

        with between_windows(lambda window: print("held before window", window)):
            run_spec(ExperimentSpec(jobs=[JobSpec(model="smallcnn")], repeats=3, warm_repeats=True))
    """
    _BETWEEN.append(call)
    try:
        yield
    finally:
        _BETWEEN.remove(call)


def run_between(window: int) -> None:
    """The innermost `between_windows` call, if any, before the launch's window `window`."""
    for call in _BETWEEN[-1:]:
        call(window)


def jobs_cpu_s(pids: Any) -> float:
    """User + system CPU seconds of the live processes `pids` and their children so far (a kept job's loader
    workers included): what a warm window's jobs used is the difference over it."""
    total = 0.0
    for pid in pids:
        try:
            process = psutil.Process(pid)
            times = process.cpu_times()  # its loader workers that ended: in its children's times
            total += times.user + times.system + times.children_user + times.children_system
            for child in process.children(recursive=True):
                times = child.cpu_times()
                total += times.user + times.system
        except psutil.Error:  # gone meanwhile: its time is lost to the figure (the run records what it saw)
            continue
    return total

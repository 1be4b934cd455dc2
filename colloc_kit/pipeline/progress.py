"""Progress of an experiment, in a terminal or a Jupyter notebook (tqdm picks the right display).

    >>> progress = Progress(total_runs=4)          # doctest: +SKIP
    >>> progress.run_started("naive x2 r0", n_jobs=2)                       # doctest: +SKIP
    >>> progress.on_event(event); progress.run_finished("2/2 complete")     # doctest: +SKIP

`on_rate(run, job, t, images_per_s)` hears every job's throughput as it is measured (the panel's live view), from
the launcher's event threads; `on_gpu(run, sample)` every sample of the run's GPU (the monitor's thread).

With several GPUs, each cell runs in its own process and reports its lines (`report=`) to the dispatcher, whose
`GpuBoard` shows one line per GPU under a bar over the cells:

    >>> board = GpuBoard(["GPU 0", "GPU 1"]); board.more_cells(8)   # doctest: +SKIP
    >>> board.show("GPU 1", "mps x2 r0: steady, 9,120 img/s"); board.cell_finished() # doctest: +SKIP
"""

from __future__ import annotations

import sys
from typing import Callable

from tqdm.auto import tqdm

from colloc_kit import events
from colloc_kit.statuses import COMPLETE

__all__ = ["Progress", "GpuBoard"]


class Progress:
    """One bar over the runs; its text shows the current run's phase and live images/s summed over its jobs.

    With `report`, no bar is drawn: each new text goes to `report` (a cell process tells its dispatcher).
    """

    def __init__(self, total_runs: int, enabled: bool = True, report: Callable[[str], None] | None = None,
                 on_rate: Callable[[str, str, float, float], None] | None = None,
                 on_gpu: Callable[[str, dict], None] | None = None):
        self.bar = tqdm(total=total_runs, unit="run", disable=not enabled or report is not None, dynamic_ncols=True)
        self.report = report
        self.rates: dict[str, float] = {}
        self.label = ""
        self.measured: set[str] = set()  # the jobs whose window of the current run ended complete (`end`)
        self.on_rate, self.on_gpu = on_rate, on_gpu

    def run_started(self, label: str, n_jobs: int) -> None:
        """A run of `n_jobs` jobs named `label` starts: its line says so."""
        self.label, self.rates, self.measured = label, {}, set()
        self._describe(f"{label}: starting {n_jobs} job(s)")

    def on_event(self, event: dict) -> None:
        """A worker event: throughput intervals update the line (and `on_rate`); errors get a line of their own, which
        says where a job failed after its window had ended (training on, held, or as its launch closed): the
        window stands, as its run's record keeps it.

        >>> progress = Progress(total_runs=1, enabled=False)
        >>> progress.run_started("mps x2 r1 (warm)", n_jobs=2)
        >>> progress.on_event({"type": "end", "job": "j0", "status": "complete"})
        >>> progress.on_event({"type": "error", "job": "j0", "kind": "cuda_error", "message": "cuDNN error"})
        mps x2 r1 (warm): job j0 failed after its measured window, which stands (cuda_error): cuDNN error
        >>> progress.on_event({"type": "error", "job": "j1", "kind": "cuda_error", "message": "out of memory"})
        mps x2 r1 (warm): job j1 failed (cuda_error): out of memory
        """
        kind = event["type"]
        if kind == events.INTERVAL and event.get("interval_s"):
            self.rates[event["job"]] = event["interval_images"] / event["interval_s"]
            if self.on_rate:
                self.on_rate(self.label, event["job"], event["t"], self.rates[event["job"]])
            phase = "warm-up" if event.get("warmup") else "steady"
            self._describe(f"{self.label}: {phase}, {sum(self.rates.values()):,.0f} img/s")
        elif kind == events.END and event.get("status") == COMPLETE:
            self.measured.add(event["job"])
        elif kind == events.ERROR:
            when = " after its measured window, which stands" if event["job"] in self.measured else ""
            self.write(f"{self.label}: job {event['job']} failed{when} ({event.get('kind')}): {event.get('message')}")

    def gpu_sample(self, sample: dict) -> None:
        """One sample of the run's GPU (the monitor's columns: t, gpu_util_pct, sm_util_pct, mem_used_mb,
        power_w...)."""
        if self.on_gpu:
            self.on_gpu(self.label, sample)

    def run_finished(self, summary: str, label: str | None = None) -> None:
        """The run ended: its line shows `summary` and the bar moves on. `label`: the run's, where the next run has
        started by now (a lane reads a cell back while its next one starts)."""
        self._describe(f"{label or self.label}: {summary}")
        self.bar.update(1)

    def write(self, message: str) -> None:
        """A line above the bar (or to `report`), e.g. which cells were skipped."""
        (self.report or self.bar.write)(message)

    def close(self) -> None:
        """Close the progress bar. Closed while an interrupt or an error goes by (the pipeline closes it in a
        `finally`), the bar says so and a notebook's turns red: a stopped experiment never looks done, green at 100 %,
        even where its last run had reported finished."""
        stopped = sys.exc_info()[0]
        if stopped is not None and not self.bar.disable:
            why = "interrupted" if issubclass(stopped, KeyboardInterrupt) else "stopped by an error"
            self._describe(f"{self.label}: {why}; what was measured is kept" if self.label else why)
            if hasattr(self.bar, "disp"):  # tqdm.notebook: close() keeps a "danger" bar as it is
                self.bar.disp(bar_style="danger")
        self.bar.close()

    def _describe(self, text: str) -> None:
        if self.report:
            self.report(text)
        else:
            self.bar.set_description(text)


class GpuBoard:
    """A bar over an experiment's cells and, below it, one line per GPU saying what its cell is doing."""

    def __init__(self, gpu_labels: list[str], total_cells: int = 0, enabled: bool = True):
        self.bar = tqdm(total=total_cells, unit="cell", disable=not enabled, dynamic_ncols=True, position=0)
        self.lines = {label: tqdm(total=0, bar_format="{desc}", disable=not enabled, position=i + 1, leave=True)
                      for i, label in enumerate(gpu_labels)}
        for label, line in self.lines.items():
            line.set_description_str(f"{label}: idle")

    def show(self, gpu_label: str, text: str) -> None:
        """Show `text` on the line of GPU `gpu_label`."""
        self.lines[gpu_label].set_description_str(f"{gpu_label}: {text}")

    def more_cells(self, count: int) -> None:
        """`count` more cells to run: the overall bar's total grows (one board serves experiments queued later)."""
        self.bar.total += count
        self.bar.refresh()

    def cell_finished(self) -> None:
        """One more cell done: the overall bar moves on."""
        self.bar.update(1)

    def write(self, message: str) -> None:
        """Print `message` above the bars."""
        self.bar.write(message)

    def close(self) -> None:
        """Close every GPU's line and the overall bar."""
        for line in self.lines.values():
            line.close()
        self.bar.close()

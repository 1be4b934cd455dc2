"""Progress of an experiment, in a terminal or a Jupyter notebook (tqdm picks the right display).

    >>> progress = Progress(total_runs=4)          # doctest: +SKIP
    >>> progress.run_started("naive x2 r0", n_jobs=2); progress.on_event(event); progress.run_finished("2/2 complete")

`on_rate(run, job, t, images_per_s)` hears every job's throughput as it is measured (the panel's live view), from
the launcher's event threads.
"""

from __future__ import annotations

from typing import Callable

from tqdm.auto import tqdm

from . import events


class Progress:
    """One bar over the runs; its text shows the current run's phase and live images/s summed over its jobs."""

    def __init__(self, total_runs: int, enabled: bool = True,
                 on_rate: Callable[[str, str, float, float], None] | None = None):
        self.bar = tqdm(total=total_runs, unit="run", disable=not enabled, dynamic_ncols=True)
        self.rates: dict[str, float] = {}
        self.label = ""
        self.on_rate = on_rate

    def run_started(self, label: str, n_jobs: int) -> None:
        self.label, self.rates = label, {}
        self.bar.set_description(f"{label}: starting {n_jobs} job(s)")

    def on_event(self, event: dict) -> None:
        kind = event["type"]
        if kind == events.INTERVAL and event.get("interval_s"):
            self.rates[event["job"]] = event["interval_images"] / event["interval_s"]
            if self.on_rate:
                self.on_rate(self.label, event["job"], event["t"], self.rates[event["job"]])
            phase = "warm-up" if event.get("warmup") else "steady"
            self.bar.set_description(f"{self.label}: {phase}, {sum(self.rates.values()):,.0f} img/s")
        elif kind == events.ERROR:
            self.bar.write(f"{self.label}: job {event['job']} failed ({event.get('kind')}): {event.get('message')}")

    def run_finished(self, summary: str) -> None:
        self.bar.set_description(f"{self.label}: {summary}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()

"""What one command did over several `run_spec` calls (the seed study's experiments): the cells it measured, those
that one of its experiments measured and a later one reused (a shared baseline: measured once), and those found
complete from before the command started. Said once at the end, counted, instead of a "reused" notice per call:
only the last kind is the user's repeated command.

    >>> tally = Tally()
    >>> tally.add(measured=["lone-r0", "naive-x2-r0"], complete={})
    >>> tally.add(measured=["mps-x2-r0"], complete={"lone-r0": None})
    >>> tally.line("seed-33", 1176.4)
    'colloc-kit: seed-33: 3 cells measured in 19 min 36 s, 1 of them shared by later experiments (measured once, \
reused); nothing reused from an earlier command.'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from colloc_kit.stats import plural

__all__ = ["Tally"]


@dataclass
class Tally:
    """Cell ids measured by this command, shared between its experiments, and reused from before it started (with
    the start time of the latest such run, as a Unix time)."""

    measured: set[str] = field(default_factory=set)
    shared: set[str] = field(default_factory=set)
    earlier: set[str] = field(default_factory=set)
    latest_earlier: float | None = None

    def add(self, measured: Iterable[str], complete: Mapping[str, float | None]) -> None:
        """One `run_spec` call: the ids it measured, and the ids it found complete with when each run started."""
        for cell_id, started in complete.items():
            if cell_id in self.measured:
                self.shared.add(cell_id)
                continue
            self.earlier.add(cell_id)
            if started is not None:
                self.latest_earlier = max(started, self.latest_earlier or started)
        self.measured.update(measured)

    def line(self, experiment: str, wall_s: float) -> str:
        """The closing line: what was measured in the command's `wall_s` seconds, shared and reused, counted."""
        shared = f", {len(self.shared):,} of them shared by later experiments (measured once, reused)" \
            if self.shared else ""
        if self.earlier:
            when = time.strftime(" (latest %H:%M)", time.localtime(self.latest_earlier)) if self.latest_earlier else ""
            earlier = (f"{plural(len(self.earlier), 'cell')} reused, complete from an earlier command{when}: to "
                       "measure them again, give another --out or --name")
        else:
            earlier = "nothing reused from an earlier command"
        minutes, seconds = divmod(round(wall_s), 60)
        return (f"colloc-kit: {experiment}: {plural(len(self.measured), 'cell')} measured in {minutes} min {seconds} s"
                f"{shared}; {earlier}.")

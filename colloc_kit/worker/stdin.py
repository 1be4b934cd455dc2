"""The launcher's side of a worker's stdin (the protocol: `colloc_kit.events`): the start barrier, then `stop`,
`pause`, `go`, `close`, `feed {json}` and EOF, heard on a thread while the worker trains.

    >>> begin(barrier=False).said_stop.is_set()     # no launcher: the job stops once its window is measured
    True
"""

from __future__ import annotations

import sys
import threading

from colloc_kit import events

__all__ = ["Launcher", "begin"]


def begin(barrier: bool) -> "Launcher | None":
    """Wait at the start barrier (with one); the launcher's side of stdin from then on, or None if it went away."""
    if barrier and not sys.stdin.readline():
        return None
    return Launcher(listen=barrier)


class Launcher:
    """The launcher's side of stdin after the barrier: `stop` (end the window, then leave), `pause` (end it, train on
    held until `go`: a warm repeat's next window, or until `stop`), `close` (another job ended its window: the run's
    common window is over, `said_close`), `feed {json}` (while held: a feed swap, taken by `take_feed`) or EOF when the
    launcher is gone.

    Without a launcher (`listen=False`) the job stops as soon as its window is measured.
    """

    def __init__(self, listen: bool):
        self.said_stop, self.paused, self.said_go, self.said_close, self.gone = (threading.Event() for _ in range(5))
        self.asked_feed: str | None = None  # a `feed` line's JSON, until taken
        if not listen:
            self.said_stop.set()
            return
        threading.Thread(target=self._listen, name="launcher-stdin", daemon=True).start()

    def holding(self) -> bool:
        """After a window's end: whether the job is paused, not yet told what next (it trains on, held, meanwhile)."""
        return self.paused.is_set() and not (self.said_go.is_set() or self.gone.is_set())

    def take_feed(self) -> str | None:
        """The JSON of a `feed` line said since the last call, if any (taken: said once, swapped once)."""
        asked, self.asked_feed = self.asked_feed, None
        return asked

    def again(self) -> bool:
        """After the hold: whether the launcher asked for another window (it paused the job and then said go);
        False where it said stop or went away (the job leaves, its windows complete)."""
        if not (self.paused.is_set() and self.said_go.is_set()):
            return False
        for said in (self.said_stop, self.paused, self.said_go, self.said_close):
            said.clear()
        return True

    def _listen(self) -> None:
        for line in sys.stdin:
            said = line.strip()
            if said == events.PAUSE:
                self.paused.set()  # before said_stop: the window it ends leads into the hold
            elif said == events.STOP:
                self.paused.clear()  # stop, also after a pause: leave
            elif said == events.GO:
                self.said_go.set()
            elif said == events.CLOSE:
                self.said_close.set()
            elif said.startswith(f"{events.FEED} "):
                self.asked_feed = said.removeprefix(events.FEED).strip()
            if said in (events.STOP, events.PAUSE):
                self.said_stop.set()
        self.gone.set()
        self.said_stop.set()

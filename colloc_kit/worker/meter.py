"""A job's measured window: steps counted against its budget, intervals, epochs and the window reported as events
(`Meter`, which the worker's training loop drives). A warm repeat (`ExperimentSpec.warm_repeats`) starts a fresh
`Meter` for each window of one launch; after the first, without warm-up: between windows the job trained on with the
last window's meter, its steps held.

    >>> from colloc_kit.spec import JobSpec
    >>> meter = Meter(JobSpec(model="smallcnn", device="cpu", steps=2, warmup_steps=0), 10, events.EventWriter("j0"))
    >>> meter.count_step(), meter.count_step(), meter.ended_by
    (False, True, 'steps')
"""

from __future__ import annotations

import math
import time
from typing import Any

from colloc_kit import events
from colloc_kit.spec import JobSpec
from colloc_kit.stats import relative_ci95
from colloc_kit.worker.process import cores_seen

__all__ = ["Meter"]


class Meter:
    """Counts steps against the budget and reports them: intervals, epochs, and the measured window.

    The budget counts the measured window only: `steps` and `seconds` start after warm-up; `epochs` are whole
    passes over the data, warm-up included. Past the budget (`measured`), steps are *held*: the job trains on, under
    the same sharing, until the launcher says stop (or, paused, until its next window); held intervals carry
    `held: true` and never count for the job's own throughput. With `until_ci`, a `seconds` window ends early, after
    `min_seconds`, once its intervals' images/s have a 95 % CI no wider than that share (stats.relative_ci95, the CI
    `figures` reports for a job alone). Told that the run's common window is over (`count_step`'s `closing`), a
    window of seconds ends at once. The `measured` event says why the window ended (`ended_by`: precision, seconds,
    steps, epochs or common). The device is synchronised only where a time is read (`count_step` says when).
    """

    def __init__(self, spec: JobSpec, steps_per_epoch: int, writer: events.EventWriter):
        self.spec, self.steps_per_epoch, self.writer = spec, steps_per_epoch, writer
        self.budget_steps = None if spec.steps is None else spec.warmup_steps + spec.steps
        if spec.steps is None and spec.seconds is None:
            self.budget_steps = (spec.epochs or 1) * steps_per_epoch
        self.t0 = self.window_t0 = self.epoch_t0 = time.perf_counter()
        self.step = self.window_step0 = 0
        self.data_wait_s = 0.0
        self.steady_t0: float | None = self.t0 if spec.warmup_steps == 0 else None
        self.steady_step0 = 0
        self.end_t = self.window_end_t = self.t0
        self.measured = self._window_due = False  # measured: the budget is met and `window` is final
        self.ended_by: str | None = None  # why the window ended: precision, seconds, steps, epochs or common
        self.window: dict = {}  # steady_images, steady_s, images_per_s (and a note) of the measured window
        self.rates: list[float] = []  # images/s of each interval of the measured window so far (figures.interval_rates)
        self.cores_ran_on: set[int] = set()

    @property
    def images(self) -> int:
        """Images trained so far, warm-up and held steps included."""
        return self.step * self.spec.batch_size

    def count_step(self, stopping: bool = False, closing: bool = False) -> bool:
        """One more step done; True when something is due that needs the device synchronised first. `closing`: the
        run's common window has ended (another job's did, `events.CLOSE`): a window of `seconds` (the most it
        measures) ends now, once it has a steady interval; a count of steps or epochs is kept whole."""
        self.step += 1
        now = time.perf_counter()
        if self.measured:
            due_now = False
        elif closing and self.rates and self.spec.seconds is not None:
            due_now, self.ended_by = True, "common"
        elif self.budget_steps is not None and self.step >= self.budget_steps:
            due_now, self.ended_by = True, "steps" if self.spec.steps is not None else "epochs"
        elif self.spec.seconds is not None and self.steady_t0 is not None and now - self.steady_t0 >= self.spec.seconds:
            due_now, self.ended_by = True, "seconds"
        else:
            due_now = False
        self._window_due = due_now
        return (due_now or (self.measured and stopping) or self.step == self.spec.warmup_steps
                or self.step % self.steps_per_epoch == 0 or now - self.window_t0 >= self.spec.interval_s)

    def report(self, loss: Any) -> None:
        """Emit what is due, with the device synchronised: an interval, the end of warm-up, an epoch, the window."""
        now = time.perf_counter()
        warmup_end = self.step == self.spec.warmup_steps
        steps = self.step - self.window_step0
        if steps and (self._window_due or warmup_end or self.measured or now - self.window_t0 >= self.spec.interval_s):
            warmup = self.step <= self.spec.warmup_steps
            self.writer.emit(events.INTERVAL, step=self.step, images=self.images, loss=float(loss),
                             step_time_s=(now - self.window_t0) / steps, data_wait_s=self.data_wait_s,
                             warmup=warmup, held=self.measured,
                             interval_s=now - self.window_t0, interval_images=steps * self.spec.batch_size)
            if not (warmup or self.measured) and now > self.window_t0:
                self.rates.append(steps * self.spec.batch_size / (now - self.window_t0))
                if not self._window_due and self._precise(now):
                    self._window_due, self.ended_by = True, "precision"
            self.cores_ran_on |= cores_seen()
            self.window_t0, self.window_step0, self.data_wait_s = now, self.step, 0.0
        if warmup_end:
            self.steady_t0, self.steady_step0 = now, self.step
        if self.step % self.steps_per_epoch == 0:
            images = self.steps_per_epoch * self.spec.batch_size
            self.writer.emit(events.EPOCH, epoch=self.step // self.steps_per_epoch, epoch_time_s=now - self.epoch_t0,
                             images=images, images_per_s=images / (now - self.epoch_t0))
            self.epoch_t0 = now
        self.end_t = now
        if self._window_due:
            self.measured, self.window_end_t = True, now
            self.window = self._window()
            ci = relative_ci95(self.rates)
            self.writer.emit(events.MEASURED, steps=self.step, **self.window, ci=None if math.isnan(ci) else ci,
                             ended_by=self.ended_by, cores_ran_on=sorted(self.cores_ran_on))

    def _precise(self, now: float) -> bool:
        """With `until_ci`, after `min_seconds`: whether the window's intervals so far give its images/s to that
        precision (the 95 % CI's half-width over the mean). Asked as each interval ends, so a window that ends on it
        ends on an interval's edge and reports the CI it stopped on."""
        if self.spec.until_ci is None or self.steady_t0 is None or now - self.steady_t0 < self.spec.min_seconds:
            return False
        ci = relative_ci95(self.rates)
        return not math.isnan(ci) and ci <= self.spec.until_ci

    def _window(self) -> dict:
        """The measured window's counts and throughput (none if the budget ended inside warm-up)."""
        if self.steady_t0 is None or self.end_t <= self.steady_t0:
            return {"status": "complete", "steady_images": 0, "steady_s": 0.0, "images_per_s": None,
                    "warmup_steps": self.spec.warmup_steps,
                    "note": f"the budget ended inside warm-up (after {self.step} of {self.spec.warmup_steps} warm-up "
                            "steps): no measured window; give more epochs or fewer --warmup-steps"}
        steady_images = (self.step - self.steady_step0) * self.spec.batch_size
        steady_s = self.end_t - self.steady_t0
        return {"status": "complete", "steady_images": steady_images, "steady_s": steady_s,
                "images_per_s": steady_images / steady_s, "warmup_steps": self.spec.warmup_steps}

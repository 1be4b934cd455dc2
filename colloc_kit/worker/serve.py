"""The inference job's loop (`role: serve`): a model in eval mode serving requests in order, each request's latency
from its arrival to its result on the host (queueing included, the device synchronised), reported as events.

Requests arrive open-loop (`rate_per_s`: Poisson arrivals, drawn from the job's seed) or closed-loop (`concurrency`
clients, each sending its next request the moment the last is answered). The server takes the queued requests in
order, up to `max_batch` at once; with fewer queued it waits at most `max_delay_ms` after the oldest arrived for a
fuller batch. A request is `batch_size` images (`image_size` pixels), copied to the device, classified, and its
classes copied back.

Events follow the training worker's contract (colloc_kit.events), so the launcher's barrier and common window treat
the job like any other: `interval` events count images served (`interval_images`) and carry the requests answered in
the interval as `requests`: [arrival, done] pairs on the kit's clock, and beside each its `request_parts`: [start of
its batch, its batch's device time in ms] (CUDA events from the copy in to the classes; on the CPU the forward's wall
time), from which `analysis.latency` splits a latency into queueing, host and device time; `warmup_steps` counts
served batches; the budget (`seconds` or `steps`) is the measured window. `end` adds `unserved` (arrival times still
queued when told to stop) and `dropped` (open-loop arrivals past `serving.MAX_QUEUE`). The figures are
`colloc_kit.analysis.latency`'s.

Warm repeats (`ExperimentSpec.warm_repeats`) take the training worker's `pause` and `go`: after `pause` the server
ends its window as after `stop`, then idles, held (no request drawn: the GPU is left to whatever runs meanwhile),
until `go`, its next window, which warms up again (`warmup_steps` batches: the GPU may have clocked down while it
idled) on a queue of its own, arrivals restarted; its `ready` and `start` events say `warm_window` and the
`held_before_s` it idled. A `feed` line while held (a feed swap asked of its launch) is answered with `ready` at once:
a server's requests are drawn in it, there is no feed to swap.

The scheduling is plain Python on a clock it is handed, so it runs on a fake one::

    >>> clock = FakeClock()
    >>> server = Server(Arrivals.closed_loop(2), max_batch=2, max_delay_s=0.0, clock=clock)
    >>> server.serve_once(lambda n: clock.advance(0.010 * n))
    [(0.0, 0.02), (0.0, 0.02)]
"""

from __future__ import annotations

import heapq
import os
import random
import time
from collections import deque
from typing import Any, Callable

from colloc_kit import events
from colloc_kit.serving import MAX_QUEUE
from colloc_kit.spec import JobSpec
from colloc_kit.worker.datasets import NUM_CLASSES, image_side
from colloc_kit.worker.models import build_model
from colloc_kit.worker.process import peak_rss_mb

__all__ = ["Arrivals", "FakeClock", "Server", "prime_batches", "serve_requests"]

IDLE_SLEEP_S = 0.0005  # the longest nap while waiting for a request (a coarse nap would add to every latency)
HOLD_NAP_S = 0.01  # the nap while held between warm windows (no request waits meanwhile)


class FakeClock:
    """A clock for tests: `now()` moves only when told (`advance`, or `sleep`)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        """The fake time, in seconds."""
        return self.t

    def sleep(self, seconds: float) -> None:
        """A nap moves the fake time on at once."""
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move the fake time on (never back)."""
        self.t += max(seconds, 0.0)


class Arrivals:
    """When requests arrive: a heap of future arrival times. Open loop draws them ahead; closed loop adds one
    arrival per answered request."""

    def __init__(self, times: list[float], closed: bool, rate: float | None = None, seed: int = 0):
        self.pending, self.closed, self.rate = times, closed, rate
        self.rng = random.Random(seed)
        heapq.heapify(self.pending)

    @classmethod
    def open_loop(cls, rate_per_s: float, seed: int = 0, start: float = 0.0) -> "Arrivals":
        """Poisson arrivals at `rate_per_s` from `start`, drawn from `seed`."""
        arrivals = cls([], closed=False, rate=rate_per_s, seed=seed)
        arrivals.pending = [start + arrivals.rng.expovariate(rate_per_s)]
        return arrivals

    @classmethod
    def fixed(cls, times: list[float]) -> "Arrivals":
        """Arrivals at given times (tests, replays)."""
        return cls(list(times), closed=False)

    @classmethod
    def closed_loop(cls, clients: int, start: float = 0.0) -> "Arrivals":
        """`clients` requests at `start`; each answer brings the next (`answered`)."""
        return cls([start] * clients, closed=True)

    def next_time(self) -> float:
        """When the next request arrives (inf: none pending)."""
        return self.pending[0] if self.pending else float("inf")

    def take(self, now: float) -> list[float]:
        """The arrivals up to `now`, in order (open loop: the next one is drawn as each is taken)."""
        taken = []
        while self.pending and self.pending[0] <= now:
            t = heapq.heappop(self.pending)
            taken.append(t)
            if self.rate:  # open loop: the next arrival drawn as this one is taken
                heapq.heappush(self.pending, t + self.rng.expovariate(self.rate))
        return taken

    def answered(self, done: float, count: int) -> None:
        """Closed loop: each answered client sends its next request at once."""
        if self.closed:
            for _ in range(count):
                heapq.heappush(self.pending, done)

    def restart(self, now: float) -> None:
        """Start arriving from `now` (after the barrier): requests before it never happened."""
        if self.closed:
            self.pending = [now] * len(self.pending)
        elif self.rate:  # open loop (fixed times keep theirs)
            self.pending = [now + self.rng.expovariate(self.rate)]


class Server:
    """The queue and its batching: `serve_once` waits for a batch as the rules say, serves it, and returns each
    request's (arrival, done); `last_batch` is the batch's (start, what `run` returned: its device time)."""

    def __init__(self, arrivals: Arrivals, max_batch: int, max_delay_s: float, clock: Any = time):
        self.arrivals, self.max_batch, self.max_delay_s = arrivals, max_batch, max_delay_s
        self.now: Callable[[], float] = clock.perf_counter if clock is time else clock.now
        self.sleep: Callable[[float], None] = clock.sleep
        self.queue: deque[float] = deque()
        self.dropped = 0
        self.last_batch: tuple[float, Any] = (0.0, None)

    def _admit(self) -> None:
        for t in self.arrivals.take(self.now()):
            if len(self.queue) >= MAX_QUEUE:
                self.dropped += 1
            else:
                self.queue.append(t)

    def ready_batch(self) -> int:
        """How many requests to serve now (0: wait), by the batching rule."""
        self._admit()
        if not self.queue:
            return 0
        full = len(self.queue) >= self.max_batch
        return min(len(self.queue), self.max_batch) if full or self.now() >= self.queue[0] + self.max_delay_s else 0

    def serve_once(self, run: Callable[[int], Any], give_up: Callable[[], bool] = lambda: False
                   ) -> list[tuple[float, float]]:
        """Wait for a batch (or until `give_up()`), serve it with `run(n_requests)`, and return (arrival, done) of
        each request served; [] when given up."""
        count = self.ready_batch()
        while count == 0:
            if give_up():
                return []
            until = min(self.arrivals.next_time(), self.queue[0] + self.max_delay_s if self.queue else float("inf"))
            self.sleep(min(max(until - self.now(), 0.0), IDLE_SLEEP_S))
            count = self.ready_batch()
        batch = [self.queue.popleft() for _ in range(count)]
        start = self.now()
        self.last_batch = (start, run(count))
        done = self.now()
        self.arrivals.answered(done, count)
        return [(t, done) for t in batch]


def serve_requests(spec: JobSpec, writer: events.EventWriter, torch: Any, device: Any,
                   begin: Callable[[], Any], timing: dict) -> int:
    """Build the served model, then prime, report `ready` and serve as the training worker does (`_prime_and_serve`);
    returns the exit code."""
    side = image_side(spec.dataset, spec.image_size, spec.model, spec.device)
    model = build_model(spec.model, NUM_CLASSES.get(spec.dataset, 1000), side).to(device).eval()
    cuda = device.type == "cuda"
    host = torch.rand(spec.max_batch * spec.batch_size, 3, side, side, pin_memory=cuda)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec.amp)
    built = {"build_s": events.now() - timing["imported_t"], "image_size": side,
             "params": sum(p.numel() for p in model.parameters())}  # what `ready` says of the model

    marks: list[Any] = [torch.cuda.Event(enable_timing=True) if cuda else None for _ in range(2)]
    began, ended = marks  # the device time's two ends on a GPU

    def run(n_requests: int) -> float:
        """Serve `n_requests`: copy in, classify, classes back on the host (the device synchronised); the device
        time in ms (CUDA events around the copy in and the forward; on the CPU the wall time)."""
        t0 = time.perf_counter()
        if cuda:
            began.record()
        classes = model(host[:n_requests * spec.batch_size].to(device, non_blocking=True)).argmax(1)
        if cuda:
            ended.record()
        classes.cpu()  # the classes back on the host: the device synchronised
        return began.elapsed_time(ended) if cuda else 1000 * (time.perf_counter() - t0)

    # one inference and autocast context for the whole service, entered once as a server (and the benchmark's plain
    # loop) holds it, not per request
    with torch.inference_mode(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        return _prime_and_serve(spec, writer, torch, device, begin, {**timing, **built}, run)


def prime_batches(run: Callable[[int], Any], max_batch: int) -> list[int]:
    """Serve one batch of every size the server can form (1 to `max_batch` requests) before the window: the first
    batch of a size is slow (cuDNN's autotuning of its shapes, kernels loaded on first use; an H200 took 0.75-2.9 s for
    ResNet-50's first batch of 2 and of 3 requests, every served p99 of issue 51's first runs); returns the sizes.

    >>> sizes = []
    >>> prime_batches(sizes.append, 3)
    [1, 2, 3]
    """
    sizes = list(range(1, max_batch + 1))
    for n in sizes:
        run(n)
    return sizes


def _prime_and_serve(spec: JobSpec, writer: events.EventWriter, torch: Any, device: Any, begin: Callable[[], Any],
                     built: dict, run: Callable[[int], Any]) -> int:
    """Long: prime, report `ready`, wait at the barrier, then serve until the measured window is over and the launcher
    says stop, emitting intervals with the requests answered; after `pause`, idle until `go` (a warm repeat's next
    window: `_serve_window` again) or `stop`. Returns the exit code."""
    cuda = device.type == "cuda"
    prime_t0 = time.perf_counter()
    primed = prime_batches(run, spec.max_batch)
    ready = dict(launched_at=built["launched_at"], imports_s=built["imported_t"] - built["launched_at"],
                 build_s=built["build_s"], primed_s=time.perf_counter() - prime_t0, model=spec.model, role="serve",
                 device=torch.cuda.get_device_name(device) if cuda else "cpu", batch_size=spec.batch_size,
                 image_size=built["image_size"], amp=spec.amp, max_batch=spec.max_batch, params=built["params"],
                 warmup_steps=spec.warmup_steps, primed_batches=primed, torch=torch.__version__, pid=os.getpid(),
                 ppid=os.getppid())
    writer.emit(events.READY, **ready)
    launcher = begin()
    if launcher is None:
        return 3  # the launcher went away at the barrier (train.EXIT_LAUNCHER_GONE)
    assert spec.concurrency or spec.rate_per_s  # serving.check_serve: one of them, above zero
    arrivals = (Arrivals.closed_loop(spec.concurrency) if spec.concurrency else
                Arrivals.open_loop(spec.rate_per_s or 0.0, seed=spec.seed))
    after_hold: dict[str, Any] = {}  # a later window's: how long the server idled, held, before it
    window = 0
    nothing_built = dict.fromkeys(("imports_s", "build_s", "primed_s"), 0.0)  # a later window's: its launch's did
    while True:
        if window:  # a warm repeat's window: nothing was built or primed for it (its launch's first run did)
            writer.emit(events.READY, **{**ready, **nothing_built, **after_hold})
        writer.emit(events.START, **after_hold)
        if not _serve_window(spec, writer, torch, device, launcher, arrivals, run):
            return 3
        hold_t0 = time.perf_counter()
        while launcher.holding():  # idle: no request drawn, the GPU left to whatever runs meanwhile
            if launcher.take_feed() is not None:  # a swap asked of its launch: a server's requests have no feed, so
                writer.emit(events.READY, **{**ready, **nothing_built, "warm_window": window + 1, "feed_swap": True})
            time.sleep(HOLD_NAP_S)
        if not launcher.again():
            return 0
        window += 1
        after_hold = dict(warm_window=window, warmup_steps=spec.warmup_steps,
                          held_before_s=time.perf_counter() - hold_t0)


def _serve_window(spec: JobSpec, writer: events.EventWriter, torch: Any, device: Any, launcher: Any,
                  arrivals: Arrivals, run: Callable[[int], Any]) -> bool:
    """One measured window, its warm-up first (`spec.warmup_steps` batches: a server that idled warms up again), on
    a queue of its own, arrivals restarted now; its `end` event. False if the launcher went away."""
    server = Server(arrivals, spec.max_batch, spec.max_delay_ms / 1000)
    meter = _ServeMeter(spec, writer, offset=events.now() - time.perf_counter())
    arrivals.restart(time.perf_counter())
    while not (meter.measured and launcher.said_stop.is_set()):
        if launcher.gone.is_set():
            return False
        idle_done = lambda: launcher.gone.is_set() or (meter.measured and launcher.said_stop.is_set())  # noqa: E731
        meter.add(server.serve_once(run, give_up=idle_done), time.perf_counter(), server.last_batch)
    meter.flush(time.perf_counter())
    cuda = device.type == "cuda"
    writer.emit(events.END, **meter.window, steps=meter.batches, images=meter.images, train_s=meter.last - meter.t0,
                held_s=meter.last - meter.window_end, dropped=server.dropped,
                unserved=[meter.kit(t) for t in server.queue], peak_rss_mb=peak_rss_mb(),
                peak_allocated_mb=torch.cuda.max_memory_allocated(device) / 2 ** 20 if cuda else None)
    return True


class _ServeMeter:
    """Counts served batches against the budget and reports intervals with their requests, and the window."""

    def __init__(self, spec: JobSpec, writer: events.EventWriter, offset: float):
        self.spec, self.writer, self.offset = spec, writer, offset
        self.t0 = self.last = self.interval_t0 = time.perf_counter()
        self.batches = self.images = self.interval_images = 0
        self.requests: list[list[float]] = []
        self.parts: list[list[float]] = []  # beside each request: [its batch's start on the kit's clock, device ms]
        self.steady_t0: float | None = self.t0 if spec.warmup_steps == 0 else None
        self.steady_images, self.window_end, self.measured = 0, self.t0, False
        self.window: dict[str, Any] = {}  # the measured window's figures, once measured

    def kit(self, t: float) -> float:
        return round(t + self.offset, 6)

    def add(self, served: list[tuple[float, float]], now: float, batch: tuple[float, Any]) -> None:
        if served:
            self.batches += 1
            images = len(served) * self.spec.batch_size
            self.images += images
            self.interval_images += images
            self.requests += [[self.kit(a), self.kit(d)] for a, d in served]
            self.parts += [[self.kit(batch[0]), round(batch[1], 4)]] * len(served)
        warmup_end = self.steady_t0 is None and self.batches >= self.spec.warmup_steps
        if warmup_end or now - self.interval_t0 >= self.spec.interval_s:
            self.flush(now)
        if warmup_end:
            self.steady_t0 = now
        elif self.steady_t0 is not None and not self.measured:
            self.steady_images += len(served) * self.spec.batch_size
            if self._budget_met(now):
                self.flush(now)
                self.measured, self.window_end = True, now
                seconds = now - self.steady_t0
                self.window = {"status": "complete", "steady_images": self.steady_images, "steady_s": seconds,
                               "images_per_s": self.steady_images / seconds if seconds > 0 else None,
                               "warmup_steps": self.spec.warmup_steps}
                self.writer.emit(events.MEASURED, steps=self.batches, **self.window)
        self.last = now

    def _budget_met(self, now: float) -> bool:
        if self.spec.steps is not None:
            return self.batches >= self.spec.warmup_steps + self.spec.steps
        return now - self.steady_t0 >= (self.spec.seconds or 10.0)  # type: ignore[operator]

    def flush(self, now: float) -> None:
        """Emit the interval since the last one (with its requests), if it lasted."""
        if now <= self.interval_t0:
            return
        self.writer.emit(events.INTERVAL, step=self.batches, images=self.images,
                         warmup=self.steady_t0 is None, held=self.measured, interval_s=now - self.interval_t0,
                         interval_images=self.interval_images, step_time_s=None, requests=self.requests,
                         request_parts=self.parts)
        self.interval_t0, self.interval_images, self.requests, self.parts = now, 0, [], []

"""The worker process: build, wait at the barrier, train within a budget, and report events on stdout.

Stdout carries events only (colloc_kit.events); everything else a library prints goes to stderr. Exit codes:
0 complete, 1 error (an `error` event says which), 2 bad input, 3 the launcher went away (stdin EOF at the barrier
or while training), 130 interrupted (SIGINT; no event). Help (--help) goes to stderr, like all text that is not an
event.

The budget (`--steps`, `--seconds`, `--epochs`) counts the measured window, after warm-up. With `--barrier stdin`
the worker, once its window is measured (`measured` event), trains on until the launcher writes `stop` (every job of
the run has its window then, so the jobs' windows overlap), and stops at once if stdin closes (the launcher died).
`pause` in place of `stop` ends the window the same way, then the worker trains on, held (its steps counted for
nothing, as past its budget), until `go`: another window (a warm repeat), which starts at once without warm-up, its
steady state never having stopped (its `ready` and `start` events say `warm_window`, `warmup_steps` 0 and the
`held_before_s` and `held_steps` trained since the last window's `end`); `stop` or EOF in place of `go`: it leaves,
exit 0. `feed {json}` while held (a feed swap: `spec.FEED_FIELDS`, such as `{"dataset": "synthetic", "data_root":
null}`) replaces the feed and keeps the model, optimizer and cuDNN's choices: the old feed's loader processes end, the
new feed's first batch loads, a `ready` says `feed_swap`, its `feed_s`, `first_batch_s` and the new data; the job trains
on, held, on the new feed, and its next window runs the spec's warm-up again (the new feed's steady state is not
reached yet). A swap that would change the model's classes or image size is refused (bad input, exit 2); synthetic
labels are drawn from the model's classes.

    python -m colloc_kit.worker --model smallcnn --device cpu --image-size 32 --steps 50 --job-id demo
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import re
import resource
import signal
import sys
import time
import traceback
from typing import IO, Any, Callable, Iterator, NoReturn

from colloc_kit import events
from colloc_kit.errors import BadInput
from colloc_kit.events import ErrorKind
from colloc_kit.serving import SERVE
from colloc_kit.spec import FEED_FIELDS, JobSpec
from colloc_kit.worker import check_job
from colloc_kit.worker.meter import Meter
from colloc_kit.worker.models import build_model
from colloc_kit.worker.process import peak_rss_mb, quick_start, settle_gpu, started_at
from colloc_kit.worker.reasons import out_of_host_memory, reason
from colloc_kit.worker.recipes import RECIPES
from colloc_kit.worker.serve import serve_requests
from colloc_kit.worker.stdin import begin

__all__ = ["CUDA_WORDS", "EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_LAUNCHER_GONE", "EXIT_OK",
           "MESSAGE_CHARS", "error_kind", "leave", "main", "parser"]

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_LAUNCHER_GONE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
CUDA_WORDS = re.compile(r"CUDA|cuDNN|CUDNN|cuBLAS|CUBLAS|NCCL")
MESSAGE_CHARS = 2000


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # bad options become a bad_input event, like every other bad input
        raise BadInput(f"{message}; see python -m colloc_kit.worker --help")


def parser() -> argparse.ArgumentParser:
    """The worker's options: JobSpec's fields, plus --job-id and --barrier."""
    p = _Parser(prog="python -m colloc_kit.worker",
                description="Train one model and report JSON-line events on stdout (colloc_kit.events).",
                epilog="Exit codes: 0 complete, 1 error, 2 bad input, 3 launcher gone (stdin EOF), 130 interrupted.")
    JobSpec.add_arguments(p, require_model=True)
    p.add_argument("--job-id", default="job0", help="the id every event carries")
    p.add_argument("--barrier", choices=("stdin", "none"), default="none",
                   help="stdin: after `ready`, wait for one line on stdin before training; after the measured "
                        "window, train on until a `stop` line (EOF at any time: exit 3)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one job as a process: parse, claim stdout for events, train; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    out = _claim_stdout()
    writer = events.EventWriter(_job_id(argv), stream=out)
    try:
        ns = parser().parse_args(argv)
        writer.job_id = ns.job_id
        return _train(JobSpec.from_namespace(ns), writer, barrier=ns.barrier == "stdin")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except Exception as exc:  # every failure becomes one error event
        kind = error_kind(exc)
        if kind != ErrorKind.BAD_INPUT:
            traceback.print_exc(file=sys.stderr)
        message = str(exc) if kind == ErrorKind.BAD_INPUT else reason(exc)  # what went wrong, what to do
        writer.emit(events.ERROR, kind=kind.value, message=message[:MESSAGE_CHARS])
        return EXIT_BAD_INPUT if kind == ErrorKind.BAD_INPUT else EXIT_ERROR


def leave(code: int) -> NoReturn:
    """End this worker process with `code` at once, its events being out (each is flushed as written): wait for the
    GPU work it queued (`settle_gpu`), stop its data-loader processes and skip the interpreter's teardown, about 1 s
    with torch loaded that every run would wait for (issue 10).

        leave(main())
    """
    settle_gpu()
    for loader_process in multiprocessing.active_children():
        loader_process.kill()
        loader_process.join()  # reaped: its CPU time counts in this process's children's, as the kit reads it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def error_kind(exc: BaseException) -> ErrorKind:
    """The kind a worker reports for `exc`: out_of_memory, cuda_error, bad_input or other."""
    if isinstance(exc, BadInput):
        return ErrorKind.BAD_INPUT
    torch = sys.modules.get("torch")
    if (torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError)) or out_of_host_memory(exc):
        return ErrorKind.OUT_OF_MEMORY
    if isinstance(exc, RuntimeError) and CUDA_WORDS.search(str(exc)):  # torch.AcceleratorError is a RuntimeError
        return ErrorKind.CUDA_ERROR
    return ErrorKind.OTHER


def _claim_stdout() -> IO[str]:
    """Keep the real stdout for events; point file descriptor 1 and sys.stdout at stderr for everything else."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _job_id(argv: list[str]) -> str:
    """The job id, read before full parsing so that even an option error is reported under it."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--job-id", default="job0")
    return pre.parse_known_args(argv)[0].job_id


def _train(spec: JobSpec, writer: events.EventWriter, barrier: bool) -> int:
    """Long: one job's life in the order it happens (checks, imports, device, build, prime, barrier, loop, end); an
    inference job (`role: serve`) branches to `worker.serve` once its device is set."""
    check_job(spec)
    import scipy.special  # noqa: F401, PLC0415 - the window's CI needs it: loaded now, not where the window ends
    import torch  # noqa: PLC0415 - after check_job: bad input is refused before torch loads

    from colloc_kit.worker.loaders import build_feed  # noqa: PLC0415 - loads torch: after check_job, timed as imports

    launched_at = started_at()  # where a run's set-up time goes: the `ready` event says
    imported_t = events.now()

    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(spec.seed)
    device = _device(torch, spec.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = cuda and spec.cudnn_autotune == "study"  # off: another workload (JobSpec)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if spec.role == SERVE:  # an inference job: its own loop, the same events and barrier
        return serve_requests(spec, writer, torch, device, lambda: begin(barrier),
                              {"launched_at": launched_at, "imported_t": imported_t})

    feed = build_feed(spec, device)
    early = quick_start()  # its loader workers load the first batch while the model builds (old path: after)
    batches = feed.epoch() if early else None
    fed_t = events.now()
    model = build_model(spec.model, feed.num_classes, feed.image_size).to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    train_step = _step_function(torch, spec, model, device)
    modelled_t = events.now()
    batches = feed.epoch() if batches is None else batches
    first = next(batches)
    built_t = events.now()
    prime_t0 = time.perf_counter()
    train_step(*first)  # cuDNN autotuning and lazy set-up happen here, before the barrier, not in the timed steps
    sync()
    ready = dict(launched_at=launched_at, imports_s=imported_t - launched_at, build_s=built_t - imported_t,
                 primed_s=time.perf_counter() - prime_t0, feed_s=fed_t - imported_t, model_s=modelled_t - fed_t,
                 first_batch_s=built_t - modelled_t, quick_start=early, **_described(torch, spec, feed, model, device))
    writer.emit(events.READY, **ready)
    launcher = begin(barrier)
    if launcher is None:
        return EXIT_LAUNCHER_GONE
    stream = _stream(first, batches, feed.epoch)

    def trained(meter: Meter) -> Any:
        """One training step on the next batch, its wait for the batch on `meter`; the loss."""
        wait_t0 = time.perf_counter()
        images, labels = next(stream)
        meter.data_wait_s += time.perf_counter() - wait_t0
        if meter.step + 1 == spec.fail_at_step:
            _inject_fault(torch, spec.fail_kind, meter.step + 1, device)
        return train_step(images, labels)

    after_hold: dict[str, Any] = {}  # a later window's: no warm-up (unless fed anew), and the held training before it
    nothing_set_up = dict.fromkeys(("imports_s", "build_s", "primed_s", "feed_s", "model_s", "first_batch_s"), 0.0)
    swapped = False  # the feed swapped while held: its `ready` said so, and the next window warms up again
    for window in itertools.count():
        if window and not swapped:  # a warm repeat's window: nothing was set up for it (its launch's first run did)
            writer.emit(events.READY, **{**ready, **nothing_set_up, **after_hold})
        writer.emit(events.START, **after_hold)
        meter = Meter(spec.with_(warmup_steps=0) if window and not swapped else spec, feed.steps_per_epoch, writer)
        while not (meter.measured and launcher.said_stop.is_set()):
            if launcher.gone.is_set():
                return EXIT_LAUNCHER_GONE
            loss = trained(meter)
            if meter.count_step(stopping=launcher.said_stop.is_set(), closing=launcher.said_close.is_set()):
                sync()
                meter.report(loss)

        mib = 2 ** 20
        writer.emit(events.END, **meter.window, steps=meter.step, images=meter.images,
                    epochs=meter.step // feed.steps_per_epoch, train_s=meter.end_t - meter.t0,
                    held_s=meter.end_t - meter.window_end_t,
                    peak_allocated_mb=torch.cuda.max_memory_allocated(device) / mib if cuda else None,
                    peak_reserved_mb=torch.cuda.max_memory_reserved(device) / mib if cuda else None,
                    peak_rss_mb=peak_rss_mb(), cores_ran_on=sorted(meter.cores_ran_on))
        hold_t0, hold_step0, swapped = time.perf_counter(), meter.step, False
        while launcher.holding():  # held steps of the measured meter, as past its budget; nothing reported
            asked = launcher.take_feed()
            if asked is not None:
                spec, feed, stream, swap_s = _swap_feed(asked, spec, feed, lambda s, n: build_feed(s, device, n))
                ready, swapped = {**ready, **_described(torch, spec, feed, model, device)}, True
                writer.emit(events.READY, **{**ready, **nothing_set_up, **swap_s, "warm_window": window + 1,
                                             "feed_swap": True})
            trained(meter)
            meter.count_step()
        if not launcher.again():
            break
        sync()  # the next window starts on a settled device, as a window after warm-up does
        after_hold = dict(warm_window=window + 1, warmup_steps=spec.warmup_steps if swapped else 0,
                          held_before_s=time.perf_counter() - hold_t0, held_steps=meter.step - hold_step0)
    return EXIT_OK


def _swap_feed(asked: str, spec: JobSpec, feed: Any, build: Callable[[JobSpec, int], Any]
               ) -> tuple[JobSpec, Any, Iterator[Any], dict[str, float]]:
    """A feed swap (`feed {json}`, held): the job's spec with the asked feed fields, its new feed (`build(spec,
    classes)`), the batches from its first, loaded, and the seconds the build and first batch took; the old feed's
    loader processes ended. BadInput where the swap asks other fields, or a feed the model was not built for.

        spec, feed, stream, swap_s = _swap_feed('{"dataset": "synthetic", "data_root": null}', spec, feed, build)
    """
    t0 = events.now()
    try:
        delta = json.loads(asked)
    except ValueError:
        delta = None
    if not isinstance(delta, dict) or not delta or set(delta) - set(FEED_FIELDS):
        raise BadInput(f"a feed swap gives some of the fields {', '.join(FEED_FIELDS)} as a JSON object; got {asked}")
    fed = spec.with_(**delta)
    new = build(fed, feed.num_classes)
    if (new.num_classes, new.image_size) != (feed.num_classes, feed.image_size):
        raise BadInput(f"a feed swap keeps the model, built for {feed.num_classes} classes at {feed.image_size} px; "
                       f"{new.label} has {new.num_classes} at {new.image_size} px: launch the job afresh for it")
    fed_t = events.now()
    feed.close()
    batches = new.epoch()
    first = next(batches)
    return fed, new, _stream(first, batches, new.epoch), {"feed_s": fed_t - t0, "first_batch_s": events.now() - fed_t}


def _step_function(torch: Any, spec: JobSpec, model: Any, device: Any) -> Callable[[Any, Any], Any]:
    """One training step of `model` as the job's recipe and AMP setting say: forward, loss, backward, optimizer step;
    returns the loss."""
    recipe = RECIPES[spec.recipe]
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9, weight_decay=recipe.weight_decay)
    scaler = torch.amp.GradScaler(device.type, enabled=spec.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec.amp)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)

    def train_step(images: Any, labels: Any) -> Any:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return train_step


def _described(torch: Any, spec: JobSpec, feed: Any, model: Any, device: Any) -> dict[str, Any]:
    """What the `ready` event says of the job as built: model, data, device, precision, threads, cores, versions."""
    return dict(model=spec.model, dataset=spec.dataset, dataset_label=feed.label,
                device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                batch_size=spec.batch_size, image_size=feed.image_size, amp=spec.amp, recipe=spec.recipe,
                channels_last=spec.channels_last, params=sum(p.numel() for p in model.parameters()),
                num_classes=feed.num_classes, steps_per_epoch=feed.steps_per_epoch, warmup_steps=spec.warmup_steps,
                threads=torch.get_num_threads(), cores=sorted(os.sched_getaffinity(0)), torch=torch.__version__,
                pid=os.getpid(), ppid=os.getppid())


def _stream(first: Any, rest: Iterator[Any], epoch: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Batches without end: the one loaded before `ready`, the rest of its epoch, then fresh epochs."""
    yield first
    yield from rest
    while True:
        yield from epoch()


def _device(torch: Any, kind: str) -> Any:
    if kind == "cuda" and not torch.cuda.is_available():
        raise BadInput("CUDA is not available to torch on this machine (a CPU-only build, or no usable GPU); "
                       "use --device cpu")
    return torch.device("cuda", torch.cuda.current_device()) if kind == "cuda" else torch.device("cpu")


def _inject_fault(torch: Any, kind: str, step: int, device: Any) -> None:
    """FAULT INJECTION for tests: fail the way a real job fails, at `step`."""
    print(f"colloc_kit.worker: injecting fault {kind} at step {step} (--fail-at-step)", file=sys.stderr, flush=True)
    if kind == "crash":  # as a killed worker looks: no event, killed by a signal
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "cuda_error":
        raise RuntimeError(f"CUDA error: an illegal memory access was encountered (injected at step {step})")
    if kind == "host_memory":
        # a need no check predicted: the address space capped (test only) just above what the job holds, then a
        # batch's worth allocated for real
        with open("/proc/self/statm") as statm:
            held = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (held + 2 ** 27, resource.getrlimit(resource.RLIMIT_AS)[1]))
        torch.empty(2 ** 31, dtype=torch.uint8)  # torch's CPU allocator fails as on a host whose memory is used up
    if device.type == "cuda":  # a real allocation beyond what is free: the allocator raises OutOfMemoryError
        free_bytes, _ = torch.cuda.mem_get_info(device)
        torch.empty(free_bytes + 2 ** 30, dtype=torch.uint8, device=device)
    raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (injected at step {step}; the CPU has no CUDA allocator)")

"""The worker process: build, wait at the barrier, train within a budget, and report events on stdout.

Stdout carries events only (colloc_kit.events); everything else a library prints goes to stderr. Exit codes:
0 complete, 1 error (an `error` event says which), 2 bad input, 3 the launcher closed the barrier (stdin EOF).

    python -m colloc_kit.worker --model smallcnn --device cpu --image-size 32 --steps 50 --job-id demo
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import IO, Any

from .. import events
from ..errors import BadInput
from ..spec import JobSpec
from . import check_job

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_BARRIER_CLOSED = 0, 1, 2, 3
CUDA_WORDS = re.compile(r"CUDA|cuDNN|CUDNN|cuBLAS|CUBLAS|NCCL")
MESSAGE_CHARS = 2000


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # bad options become a bad_input event, like every other bad input
        raise BadInput(f"{message}; see python -m colloc_kit.worker --help")


def parser() -> argparse.ArgumentParser:
    """The worker's options: JobSpec's fields, plus --job-id and --barrier."""
    p = _Parser(prog="python -m colloc_kit.worker",
                description="Train one model and report JSON-line events on stdout (colloc_kit.events).",
                epilog="Exit codes: 0 complete, 1 error, 2 bad input, 3 barrier closed (stdin EOF).")
    JobSpec.add_arguments(p, require_model=True)
    p.add_argument("--job-id", default="job0", help="the id every event carries")
    p.add_argument("--barrier", choices=("stdin", "none"), default="none",
                   help="stdin: after `ready`, wait for one line on stdin before training (EOF: exit 3)")
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
        return 130
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one error event
        if isinstance(exc, SystemExit):  # --help
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        kind = error_kind(exc)
        if kind != "bad_input":
            traceback.print_exc(file=sys.stderr)
        message = str(exc) if kind == "bad_input" else f"{type(exc).__name__}: {exc}"
        writer.emit(events.ERROR, kind=kind, message=message[:MESSAGE_CHARS])
        return EXIT_BAD_INPUT if kind == "bad_input" else EXIT_ERROR


def error_kind(exc: BaseException) -> str:
    """out_of_memory / cuda_error / bad_input / other: the kinds of colloc_kit.events.ERROR_KINDS."""
    if isinstance(exc, BadInput):
        return "bad_input"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
        return "out_of_memory"
    if isinstance(exc, RuntimeError) and CUDA_WORDS.search(str(exc)):  # torch.AcceleratorError is a RuntimeError
        return "cuda_error"
    return "other"


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


@dataclass
class _Window:
    """Progress since the last `interval` event."""

    t0: float
    step0: int = 0
    images0: int = 0
    data_wait_s: float = 0.0


def _train(spec: JobSpec, writer: events.EventWriter, barrier: bool) -> int:
    check_job(spec)
    import torch

    from .loaders import build_feed
    from .models import build_model

    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(spec.seed)
    device = _device(torch, spec.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = cuda
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    feed = build_feed(spec, device)
    model = build_model(spec.model, feed.num_classes, feed.image_size).to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, enabled=spec.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec.amp)
    criterion = torch.nn.CrossEntropyLoss()

    def train_step(images: Any, labels: Any) -> Any:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    model.train()
    batches = feed.epoch()
    batch = next(batches)
    sync()
    writer.emit(events.READY, model=spec.model, dataset=spec.dataset, dataset_label=feed.label,
                device=torch.cuda.get_device_name(device) if cuda else "cpu", batch_size=spec.batch_size,
                image_size=feed.image_size, amp=spec.amp, channels_last=spec.channels_last,
                params=sum(p.numel() for p in model.parameters()), num_classes=feed.num_classes,
                steps_per_epoch=feed.steps_per_epoch, warmup_steps=spec.warmup_steps, threads=torch.get_num_threads(),
                torch=torch.__version__, pid=os.getpid())
    if barrier and not sys.stdin.readline():
        return EXIT_BARRIER_CLOSED
    writer.emit(events.START)

    max_steps = spec.steps
    if max_steps is None and spec.seconds is None:
        max_steps = (spec.epochs or 1) * feed.steps_per_epoch
    clock = time.perf_counter
    t0 = clock()
    window, epoch_t0 = _Window(t0), t0
    step = images = epoch = epoch_steps = 0
    steady_t0, steady_images0 = (t0, 0) if spec.warmup_steps == 0 else (None, 0)
    loss = None
    while True:
        if batch is None:
            if epoch_steps == feed.steps_per_epoch:
                batches, epoch_steps = feed.epoch(), 0
            wait_t0 = clock()
            batch = next(batches)
            window.data_wait_s += clock() - wait_t0
        step += 1
        if step == spec.fail_at_step:
            _inject_fault(torch, spec.fail_kind, step, device)
        loss = train_step(*batch)
        batch = None
        images += spec.batch_size
        epoch_steps += 1
        now = clock()
        done = (max_steps is not None and step >= max_steps) or (spec.seconds is not None and now - t0 >= spec.seconds)
        warmup_end = step == spec.warmup_steps
        epoch_end = epoch_steps == feed.steps_per_epoch
        if not (done or warmup_end or epoch_end or now - window.t0 >= spec.interval_s):
            continue
        sync()
        now = clock()
        if done or warmup_end or now - window.t0 >= spec.interval_s:
            steps_in = step - window.step0
            writer.emit(events.INTERVAL, step=step, images=images, loss=float(loss), step_time_s=(now - window.t0) / steps_in,
                        data_wait_s=window.data_wait_s, warmup=step <= spec.warmup_steps, interval_s=now - window.t0,
                        interval_images=images - window.images0)
            window = _Window(now, step, images)
        if warmup_end:
            steady_t0, steady_images0 = now, images
        if epoch_end:
            epoch += 1
            epoch_images = feed.steps_per_epoch * spec.batch_size
            writer.emit(events.EPOCH, epoch=epoch, epoch_time_s=now - epoch_t0, images=epoch_images,
                        images_per_s=epoch_images / (now - epoch_t0))
            epoch_t0 = now
        if done:
            break

    end: dict[str, Any] = dict(status="complete", steps=step, images=images, epochs=epoch, train_s=now - t0,
                               warmup_steps=spec.warmup_steps)
    if steady_t0 is None or now <= steady_t0:
        end.update(steady_images=0, steady_s=0.0, images_per_s=None,
                   note=f"the budget ended inside warm-up (after {step} of {spec.warmup_steps} warm-up steps): "
                        "no steady-state window; give more steps or fewer --warmup-steps")
    else:
        end.update(steady_images=images - steady_images0, steady_s=now - steady_t0,
                   images_per_s=(images - steady_images0) / (now - steady_t0))
    mib = 2 ** 20
    end.update(peak_allocated_mb=torch.cuda.max_memory_allocated(device) / mib if cuda else None,
               peak_reserved_mb=torch.cuda.max_memory_reserved(device) / mib if cuda else None,
               peak_rss_mb=_peak_rss_mb())
    writer.emit(events.END, **end)
    return EXIT_OK


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
    if device.type == "cuda":  # a real allocation beyond what is free: the allocator raises OutOfMemoryError
        free_bytes, _ = torch.cuda.mem_get_info(device)
        torch.empty(free_bytes + 2 ** 30, dtype=torch.uint8, device=device)
    raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (injected at step {step}; the CPU has no CUDA allocator)")


def _peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (data-loader processes not included)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 2 ** 10

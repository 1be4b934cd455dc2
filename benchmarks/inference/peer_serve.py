"""The inference benchmark's peer (issue 51): a plain PyTorch server and a plain PyTorch training loop, written
without the kit (torch, torchvision and numpy only, on purpose), so the kit's latencies can be held against them.

`serve`: a generator thread puts Poisson arrivals (`--rate` per second, numpy, `--seed`) on a queue for `--seconds`;
the server takes the queued requests in order, up to `--max-batch` at once, waiting at most `--max-delay-ms` after
the oldest for a fuller batch, copies `--batch-size` images per request to the device, classifies them and copies the
classes back. Each request's arrival, start of its batch, done, and its batch's device time are written as JSON
(times in seconds from the window's start): its queueing (start - arrival), host time (done - start - device) and
device time. On a GPU the device time is the CUDA-event span from the copy in to the classes (the device busy, plus
any gap waiting for the host's launches); on the CPU it is the forward's wall time (`device_time` says which).
Requests still queued `--drain-s` after the window count with their wait so far (`unanswered`).

`train`: a plain training loop (SGD, a batch of random images copied in from pinned host memory each step) until
`--seconds` pass or a line `stop` arrives on stdin; its images/s over that window.

With `--gate`, each prints `ready` once warm and waits for a line `go` on stdin (the benchmark starts the server and
its training neighbours together). A tiny CPU check:

    python benchmarks/inference/peer_serve.py serve --model smallcnn --device cpu --image-size 32 --rate 50 \
        --seconds 2 --out /tmp/peer_serve.json
    python benchmarks/inference/peer_serve.py train --model smallcnn --device cpu --image-size 32 --batch-size 16 \
        --seconds 2 --out /tmp/peer_train.json
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torchvision
from torch import nn

WARM_FORWARDS = 20
WARM_STEPS = 10


def build(name: str, side: int) -> nn.Module:
    """A torchvision model with fresh weights (1,000 classes), or `smallcnn`: two conv blocks and a linear head."""
    if name == "smallcnn":
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                             nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64),
                             nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1000))
    extra = {"image_size": side} if name.startswith("vit_") else {}
    return torchvision.models.get_model(name, weights=None, num_classes=1000, **extra)


def autocast(device: torch.device, amp: str) -> Any:
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def gate(enabled: bool) -> None:
    """Say `ready` and wait for `go` on stdin (with --gate)."""
    if enabled:
        print("ready", flush=True)
        while sys.stdin.readline().strip() not in ("go", ""):
            pass


def poisson_arrivals(rate: float, seconds: float, seed: int) -> np.ndarray:
    """Arrival times in [0, seconds) of a Poisson process at `rate` per second.

    >>> times = poisson_arrivals(100.0, 10.0, seed=1)
    >>> bool(900 < len(times) < 1100 and (np.diff(times) > 0).all() and times[-1] < 10.0)
    True
    """
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=int(rate * seconds * 2 + 50))
    times = np.cumsum(gaps)
    return times[times < seconds]


def generate(arrivals: np.ndarray, t0: float, requests: queue.Queue) -> None:
    """Put each arrival time (seconds after `t0`) on the queue at that time, then None."""
    for arrival in arrivals:
        delay = t0 + arrival - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        requests.put(float(arrival))
    requests.put(None)


def take_batch(requests: queue.Queue, first: float, t0: float, max_batch: int, max_delay_s: float) -> list:
    """`first` and the requests queued after it, up to `max_batch`, waiting until `first + max_delay_s` at most."""
    batch = [first]
    while len(batch) < max_batch:
        left = t0 + first + max_delay_s - time.perf_counter()
        try:
            item = requests.get(timeout=left) if left > 0 else requests.get_nowait()
        except queue.Empty:
            break
        if item is None:
            requests.put(None)  # the end mark stays for the server's loop
            break
        batch.append(item)
    return batch


def device_timer(device: torch.device) -> Callable[[Callable[[], Any]], tuple[Any, float]]:
    """A function running a callable and returning (its result, its device time in ms): CUDA events on a GPU (read
    after the result is on the host), the wall time on the CPU."""
    def on_cpu(work: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        result = work()
        return result, 1000 * (time.perf_counter() - t0)

    def on_gpu(work: Callable[[], Any]) -> tuple[Any, float]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        result = work()
        end.record()
        result = result.cpu()  # the classes on the host: the device synchronised
        return result, start.elapsed_time(end)

    return on_gpu if device.type == "cuda" else on_cpu


def serve(args: argparse.Namespace) -> dict:
    """Serve Poisson requests for `args.seconds`; each request's times (see the module) and the settings."""
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    model = build(args.model, args.image_size).to(device).eval()
    host = torch.rand(args.max_batch * args.batch_size, 3, args.image_size, args.image_size, pin_memory=cuda)
    timed = device_timer(device)
    rows: list[list[float]] = []
    with torch.inference_mode(), autocast(device, args.amp):
        def forward(n: int) -> Any:
            return model(host[:n * args.batch_size].to(device, non_blocking=True)).argmax(1)

        for i in range(WARM_FORWARDS):  # every batch size it can form, each several times (a size's first is slow)
            timed(partial(forward, 1 + i % args.max_batch))
        gate(args.gate)
        requests: queue.Queue = queue.Queue()
        t0 = time.perf_counter()
        arrivals = poisson_arrivals(args.rate, args.seconds, args.seed)
        threading.Thread(target=generate, args=(arrivals, t0, requests), daemon=True).start()
        deadline = t0 + args.seconds + args.drain_s
        while time.perf_counter() < deadline:
            try:
                first = requests.get(timeout=max(deadline - time.perf_counter(), 0.0))
            except queue.Empty:
                break
            if first is None:
                break
            batch = take_batch(requests, first, t0, args.max_batch, args.max_delay_ms / 1000)
            start = time.perf_counter() - t0
            _, device_ms = timed(partial(forward, len(batch)))
            done = time.perf_counter() - t0
            rows += [[arrival, start, done, device_ms, len(batch)] for arrival in batch]
    ended = time.perf_counter() - t0
    unanswered = [float(a) for a in arrivals[len(rows):]]
    return {"program": "peer_serve", **settings(args), "window_s": args.seconds, "ended_s": ended,
            "device_time": "cuda events, copy in to classes" if cuda else "cpu forward wall time",
            "columns": ["arrival_s", "start_s", "done_s", "device_ms", "batch_requests"], "requests": rows,
            "unanswered": unanswered, "torch": torch.__version__, **summary(rows, unanswered, ended, args.seconds)}


def summary(rows: list[list[float]], unanswered: list[float], ended: float, window_s: float) -> dict:
    """p50/p99 of the latencies (nearest rank; unanswered requests at their wait so far), requests answered per second
    in the window, and the p50 of each part of a request's latency.

    >>> s = summary([[0.0, 0.0, 0.002, 1.0, 1], [0.5, 0.501, 0.504, 2.0, 1]], [], 1.0, 1.0)
    >>> s["p50_ms"], s["p99_ms"], s["requests_per_s"], s["queue_p50_ms"], s["device_p50_ms"]
    (2.0, 4.0, 2.0, 0.0, 1.0)
    """
    table = np.array(rows, dtype=float).reshape(-1, 5)
    latency = np.concatenate([table[:, 2] - table[:, 0], ended - np.array(unanswered, dtype=float)]) * 1000
    if latency.size == 0:
        return {"p50_ms": None, "p99_ms": None, "requests_per_s": 0.0}
    service = (table[:, 2] - table[:, 1]) * 1000

    def p(values: np.ndarray, q: float) -> float:
        return round(float(np.percentile(values, q, method="inverted_cdf")), 4) if values.size else float("nan")

    return {"p50_ms": p(latency, 50), "p99_ms": p(latency, 99),
            "requests_per_s": float((table[:, 2] < window_s).sum() / window_s),
            "queue_p50_ms": p((table[:, 1] - table[:, 0]) * 1000, 50), "device_p50_ms": p(table[:, 3], 50),
            "host_p50_ms": p(service - table[:, 3], 50)}


def train(args: argparse.Namespace) -> dict:
    """Train on random images until `args.seconds` pass or `stop` arrives on stdin; images/s over that window."""
    device = torch.device(args.device)
    model = build(args.model, args.image_size).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cuda = device.type == "cuda"
    images = torch.rand(args.batch_size, 3, args.image_size, args.image_size, pin_memory=cuda)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, args.amp):  # each batch copied in from the host, as from a loader
            loss = nn.functional.cross_entropy(model(images.to(device, non_blocking=True)), labels)
        loss.backward()
        optimizer.step()

    for _ in range(WARM_STEPS):
        step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    gate(args.gate)
    stop = threading.Event()
    if args.gate:
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    t0 = time.perf_counter()
    steps = 0
    while not stop.is_set() and time.perf_counter() - t0 < args.seconds:
        step()
        steps += 1
    sync()
    seconds = time.perf_counter() - t0
    return {"program": "peer_train", **settings(args), "steps": steps, "window_s": seconds,
            "images_per_s": steps * args.batch_size / seconds, "torch": torch.__version__}


def settings(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("out", "gate", "role")}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("role", choices=["serve", "train"])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--device", default="cuda")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=1, help="images per request (serve) or per step (train)")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    p.add_argument("--seconds", type=float, default=4.0, help="the window (train: its longest)")
    p.add_argument("--rate", type=float, default=50.0, help="serve: Poisson requests per second")
    p.add_argument("--max-batch", type=int, default=1, help="serve: requests served together at most")
    p.add_argument("--max-delay-ms", type=float, default=0.0, help="serve: longest wait for a fuller batch")
    p.add_argument("--drain-s", type=float, default=2.0, help="serve: time after the window to answer the queue")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gate", action="store_true", help="print ready, wait for a line go on stdin")
    p.add_argument("--out", type=Path, help="write the JSON here (else to stdout)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.backends.cudnn.benchmark = True
    result = serve(args) if args.role == "serve" else train(args)
    text = json.dumps(result)
    if args.out:
        args.out.write_text(text)
        print(json.dumps({k: v for k, v in result.items() if k not in ("requests", "unanswered")}), flush=True)
    else:
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

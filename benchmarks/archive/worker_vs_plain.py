"""The kit's worker against a plain hand-written PyTorch loop of the same configuration: what does the kit cost?

    PYTHONPATH=$PWD python benchmarks/archive/worker_vs_plain.py \
        --out benchmarks/results/h100/worker-vs-plain/worker_vs_plain.json

Both run as fresh processes on synthetic data (one random batch made once on the device), the same model, batch,
AMP and memory format, and the same window: `--warmup-steps` excluded, then steady-state images/s until `--seconds`
of training in all. They alternate (worker first in even rounds, plain first in odd ones), so drift hits both.
Target (issue 2): the worker within 3 % of the plain loop. Writes JSON to --out and CSV next to it.
CPU smoke test: --device cpu --models smallcnn --image-size 32 --batch-size 16 --seconds 2 --warmup-steps 3.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from colloc_kit.worker.models import build_model

TARGET_RATIO = 0.97


def plain_loop(model_name: str, batch_size: int, image_size: int, amp: str, channels_last: bool, device: str,
               warmup_steps: int, seconds: float) -> dict:
    """The reference: a training loop as one would write it by hand, without the kit."""
    import torch  # noqa: PLC0415 - heavy: loaded where a loop runs
    import torch.nn.functional as F  # noqa: PLC0415 - heavy: loaded where a loop runs
    import torchvision  # noqa: PLC0415 - heavy: loaded where a loop runs

    torch.backends.cudnn.benchmark = device == "cuda"
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    if model_name == "smallcnn":  # the kit's own CPU model, for the smoke test
        model = build_model(model_name, 1000, image_size)
    else:
        model = torchvision.models.get_model(model_name, weights=None, num_classes=1000)
    model = model.to(device, memory_format=memory_format).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch_size, 3, image_size, image_size, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(0, 1000, (batch_size,), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    scaler = torch.amp.GradScaler(device, enabled=amp == "fp16")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    sync()
    t0 = time.perf_counter()
    step, steady_t0 = 0, None
    while True:
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        step += 1
        if step == warmup_steps:
            sync()
            steady_t0 = time.perf_counter()
        if step > warmup_steps and time.perf_counter() - t0 >= seconds:
            break
    sync()
    steady_s = time.perf_counter() - steady_t0
    return {"images_per_s": (step - warmup_steps) * batch_size / steady_s, "steps": step, "steady_s": steady_s,
            "peak_allocated_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if device == "cuda" else None}


def run_plain(args: argparse.Namespace, model: str) -> dict:
    """The plain loop in a fresh process, as the worker gets one."""
    config = [model, args.batch_size, args.image_size, args.amp, args.channels_last, args.device, args.warmup_steps,
              args.seconds]
    out = subprocess.run([sys.executable, __file__, "--plain-child", json.dumps(config)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"the plain loop failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_worker(args: argparse.Namespace, model: str) -> dict:
    command = [sys.executable, "-m", "colloc_kit.worker", "--model", model, "--dataset", "synthetic",
               "--batch-size", str(args.batch_size), "--image-size", str(args.image_size), "--amp", args.amp,
               "--channels-last" if args.channels_last else "--no-channels-last", "--device", args.device,
               "--warmup-steps", str(args.warmup_steps), "--seconds", str(args.seconds), "--job-id", "bench"]
    out = subprocess.run(command, capture_output=True, text=True)
    end = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")][-1]
    if end["type"] != "end":
        raise SystemExit(f"the worker failed: {end}\n{out.stderr[-2000:]}")
    if end["images_per_s"] is None:
        raise SystemExit(f"the worker measured no steady window: {end['note']}; raise --seconds")
    return {k: end[k] for k in ("images_per_s", "steps", "steady_s", "peak_allocated_mb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50", help="comma-separated model names")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--amp", default="bf16", choices=("off", "bf16", "fp16"))
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20.0, help="training time per run, warm-up included")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path("benchmarks/results/h100/worker-vs-plain/worker_vs_plain.json"))
    parser.add_argument("--plain-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_child:
        print(json.dumps(plain_loop(*json.loads(args.plain_child))))
        return

    rows = []
    for round_ in range(args.rounds):
        for model in args.models.split(","):
            order = [("worker", run_worker), ("plain", run_plain)]
            for runner, run in order if round_ % 2 == 0 else order[::-1]:
                figures = run(args, model)
                rows.append({"round": round_, "model": model, "runner": runner, **figures})
                print(f"round {round_} {model:>12} {runner:>6}: {figures['images_per_s']:9.1f} images/s", flush=True)

    summary = []
    for model in args.models.split(","):
        rate = {r: [x["images_per_s"] for x in rows if x["model"] == model and x["runner"] == r]
                for r in ("worker", "plain")}
        median = {r: statistics.median(v) for r, v in rate.items()}
        ratio = median["worker"] / median["plain"]
        summary.append({"model": model, "worker_images_per_s": median["worker"], "plain_images_per_s": median["plain"],
                        "ratio": ratio, "within_target": ratio >= TARGET_RATIO,
                        **{f"{r}_spread": (max(v) - min(v)) / median[r] for r, v in rate.items()}})
        print(f"{model}: worker/plain = {ratio:.3f} (median of {args.rounds} rounds; target >= {TARGET_RATIO})")

    import torch  # noqa: PLC0415 - heavy: loaded where a loop runs

    config = {k: v for k, v in vars(args).items() if k not in ("out", "plain_child")}
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report = {"config": config, "device": device_name, "torch": torch.__version__, "summary": summary, "runs": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    with open(args.out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()

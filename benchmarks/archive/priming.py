"""Where a worker's priming step goes (issue 10): the first training step of a fresh process, part by part, as the
worker runs it, with the zygote's library preload first, and with cuDNN autotuning off for comparison.

    python benchmarks/archive/priming.py --repeats 2 --out benchmarks/results/h100/priming/priming.json

Each variant runs in a fresh process, interleaved over repeats (A B C A B C): imports, `preload_s` (the zygote's
`load_lazy_libraries`; 0 where the variant does not), CUDA context, model build, the first step in parts (forward,
backward, optimizer, a sync after each), then a second step. `mapped` names the shared libraries that the first step
loaded. ResNet-50, batch 128, bf16, channels_last, images on the device: the run-overhead benchmark's job.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = {"as-worker": {"preload": False, "autotune": True},
            "preloaded": {"preload": True, "autotune": True},
            "no-autotune": {"preload": False, "autotune": False}}


def mapped_libraries() -> set[str]:
    """The names of the shared libraries this process has mapped."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1].rsplit("/", 1)[-1] for line in maps if ".so" in line}


def child(variant: str, model_name: str, batch_size: int) -> dict:
    """One fresh process's first training step, part by part (seconds)."""
    t0 = time.perf_counter()
    import torch  # noqa: PLC0415 - timed: the imports are what this measures
    import torchvision  # noqa: PLC0415 - timed: the imports are what this measures

    from colloc_kit.worker.zygote import (  # noqa: PLC0415 - timed: the imports are what this measures
        load_lazy_libraries,
    )

    parts = {"imports_s": time.perf_counter() - t0}
    t = time.perf_counter()
    preloaded = load_lazy_libraries() if VARIANTS[variant]["preload"] else []
    parts["preload_s"] = time.perf_counter() - t

    def part(name: str, step) -> None:
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        parts[name] = time.perf_counter() - t

    torch.backends.cudnn.benchmark = VARIANTS[variant]["autotune"]
    device = torch.device("cuda")
    part("context_s", lambda: torch.ones(1, device=device))
    model = torchvision.models.get_model(model_name, num_classes=1000)
    part("build_s", lambda: model.to(device, memory_format=torch.channels_last))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch_size, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch_size,), device=device)
    before = mapped_libraries()
    loss = {}

    def forward() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss["value"] = torch.nn.functional.cross_entropy(model(images), labels)

    def step() -> None:
        forward()
        optimizer.zero_grad(set_to_none=True)
        loss["value"].backward()
        optimizer.step()

    part("first_forward_s", forward)
    part("first_backward_s", lambda: loss["value"].backward())
    part("first_optimizer_s", optimizer.step)
    part("second_step_s", step)
    parts["first_step_s"] = parts["first_forward_s"] + parts["first_backward_s"] + parts["first_optimizer_s"]
    return {"variant": variant, **parts, "preloaded": preloaded, "mapped": sorted(mapped_libraries() - before)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h100/priming/priming.json"))
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.model, args.batch_size)))
        return
    rows = []
    for _ in range(args.repeats):
        for variant in VARIANTS:
            out = subprocess.run([sys.executable, __file__, "--child", variant, "--model", args.model,
                                  "--batch-size", str(args.batch_size)], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.splitlines()[-1]))
    keys = [k for k, v in rows[0].items() if k.endswith("_s")]
    means = {variant: {k: statistics.mean(r[k] for r in rows if r["variant"] == variant) for k in keys}
             for variant in VARIANTS}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": rows, "mean": means}, indent=1))
    for variant, m in means.items():
        print(f"{variant:12s} " + ", ".join(f"{k[:-2]} {v:.2f}" for k, v in m.items()))
    print("mapped by the first step (as-worker):", rows[0]["mapped"])


if __name__ == "__main__":
    main()

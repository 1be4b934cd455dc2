"""Repro of the MPS close fault: 4 jobs (ResNet-26/50, synthetic data on the GPU) under a private MPS daemon, the
kit's Wave kept after its window (held training), then closed as a warm launch closes (stdin closed, 5 s, stop).
Per cycle: whether the MPS server logged a fatal GPU error, which client exited first, the jobs' errors.
    python3 .mpsrepro/repro.py VARIANT SECONDS OUTDIR     (SWAP=1: as a seed launch, see run2.sh)
(Run from a folder ignored by git, .mpsrepro/, with run.sh / run2.sh; tidied for lint after the runs, no change in
what it does.)"""
import json
import os
import re
import sys
import time
import tarfile
from pathlib import Path
from colloc_kit.spec import JobSpec
from colloc_kit.spec.experiment import ModeSpec
from colloc_kit.modes.registry import make_mode
from colloc_kit.pipeline.launcher import Wave, LaunchItem
from colloc_kit.worker.zygote import Zygote
import contextlib
SWAP = os.environ.get("SWAP") == "1"  # as a seed launch: disk data (4 loader workers) first, then swapped to synthetic

variant, budget, out = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
hold_s = float(os.environ.get("HOLD_S", "0.4"))
work = Path(f"/tmp/repro-{variant}")
mixes = [("mps", {}, ["timm.resnet26", "timm.resnet50", "timm.resnet50", "timm.resnet50"]),
         ("mps_1g1g2g2g", {"partitions": ["1g", "1g", "2g", "2g"]},
          ["timm.resnet26", "timm.resnet26", "timm.resnet50", "timm.resnet50"])]
t_end = time.monotonic() + budget
def spec_of(m):
    if SWAP:
        return JobSpec(model=m, dataset="imagefolder", data_root="/tmp/seed-data/cifar10", batch_size=128, seconds=3,
                       warmup_steps=5, device="cuda", amp="off", cudnn_autotune="study", workers=4, image_size=224)
    return JobSpec(model=m, dataset="synthetic", batch_size=128, seconds=2, warmup_steps=5, device="cuda", amp="off",
                   cudnn_autotune="study")
all_specs = [spec_of(m) for _, _, ms in mixes for m in ms]
stack = contextlib.ExitStack()
zyg = stack.enter_context(Zygote(all_specs)) if SWAP else None

results, cycle = [], 0
faulty_dirs = []
while time.monotonic() < t_end - 25:
    label, opts, models = mixes[cycle % len(mixes)]
    d = work / f"c{cycle:03d}-{label}"
    mode = make_mode(ModeSpec("mps", opts), workdir=d / "mode", gpu=0, device="cuda")
    t0 = time.time()
    with mode:
        slots = mode.slots(len(models))
        items = [LaunchItem(f"j{i}-{m}", spec_of(m), slots[i]) for i, m in enumerate(models)]
        wave = Wave(items, d / "jobs", time_limit_s=120, keep=True, zygote=zyg)
        outs = wave.run()
        if SWAP and wave.kept:
            outs = wave.again(d / "t0", feeds=[it.spec.with_(dataset="synthetic", data_root=None) for it in items])
        if SWAP and wave.kept:
            outs = wave.again(d / "t1")
        kept = wave.kept
        pids = wave.pids()
        time.sleep(hold_s)
        t_close = time.time()
        wave.close()
        rcs = {j.item.job_id: j.proc.returncode for j in wave._jobs}
        fault = mode.daemon.server_fault()
    log = (d / "mode" / "mps" / "log" / "server.log")
    text = log.read_text() if log.exists() else ""
    exits = re.findall(r"assuming client \{PID: (\d+), Context ID: 1\} exit", text)
    fatal = re.findall(r"Client \{PID: (\d+), Context: 1\} encountered a fatal GPU error", text)
    errs = {}
    settle = {}
    for f in sorted((d / "jobs").glob("*.stderr.log")):
        t = f.read_text(errors="replace")
        lines = [line for line in t.splitlines() if re.search(r"Error|error", line)]
        errs[f.name.split(".stderr")[0]] = lines[-1][:160] if lines else ""
        m = re.search(r"settle_ms=([\d.]+)", t)
        if m:
            settle[f.name.split(".stderr")[0]] = float(m.group(1))
    r = dict(cycle=cycle, variant=variant, mix=label, kept=kept, statuses=[o.status for o in outs], rcs=rcs,
             pids={v: k for k, v in pids.items()}, first_exit=[pids.get(int(p)) for p in exits[:1]],
             fatal=[pids.get(int(p), p) for p in fatal], fault=bool(fatal), server_fault=(fault or "")[:200],
             job_errors=errs, settle_ms=settle, cycle_s=round(time.time() - t0, 1))
    print(json.dumps(r), flush=True)
    results.append(r)
    if fatal:
        faulty_dirs.append(d)
    cycle += 1
out.mkdir(parents=True, exist_ok=True)
(out / f"cycles-{variant}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
with tarfile.open(out / f"logs-{variant}.tgz", "w:gz") as tar:
    for d in (faulty_dirs[:4] or [work / "c000-mps"]) + ([work / "c000-mps"] if faulty_dirs else []):
        if d.exists():
            tar.add(d, arcname=d.name)
stack.close()
n = len(results)
print(f"SUMMARY {variant}: {sum(r['fault'] for r in results)} of {n} cycles faulted the MPS server; "
      f"job errors in {sum(any(r['job_errors'].values()) for r in results)}", flush=True)

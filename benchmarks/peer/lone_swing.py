"""Why does a lone job's throughput swing between repeats? Each hypothesis as one variant, interleaved.

    python benchmarks/peer/lone_swing.py --repeats 4 --seconds 5 \
        --out benchmarks/peer/results/h100-lone-swing/host-bound
    python benchmarks/peer/lone_swing.py --job seed --data-root /tmp/seed-200k/cifar10 --seconds 40 \
        --variants kit,train.py,no-zygote,pinned --repeats 3 --timm /tmp/timm --out /tmp/lone-seed

Two jobs, alone (exclusive). `small`: ResNet-26 at 32 px, bf16, batch 128, synthetic data made once on the device (no
input pipeline), the kit's pinned placement. `seed`: the seed recipe's lone job (timm's ResNet-26 on an image folder,
e.g. from `colloc-kit data make cifar10 --images 200000`, timm's transform, 4 loader workers, fp32), unpinned as the
seed specs run it; its rate is what its loader workers get from the host. Variants, one change each against `kit` (the
kit's defaults): `no-monitor` (the parent's NVML sampling off), `gc-off` (Python's garbage collector disabled in the
worker, through a sitecustomize on PYTHONPATH), `pinned` (the kit and its worker confined to 4 cores with
sched_setaffinity), `expandable` (the CUDA caching allocator with expandable segments), `no-zygote` (the worker started
afresh, not forked from the kit's preloaded zygote), `standalone` (the worker run alone, events to a file: no launcher,
no event pipe), `workers-12` (12 loader workers, the
host-matched baseline's of three copies), `neighbour` (while seven copies of the job train on GPU 1, as another lane of
a two-GPU run does beside a lone cell); with `--job seed`, `train.py` (the study's program on the same workload, through
`peer_train_py.run_train_py`: give `--timm`), so the two swing side by side under the same drift. Every run records the
host CPU's steal time and frequency, the GPU's SM clock (monitor samples) and the host's busy cores over the job's
window per image (`cpu_ms_per_image`: what the same work cost in that run), split, from a sampler of this process's
descendants, into the training process's and its loader workers' CPU time per image, user and system
(`train_user_ms_per_image`, ..., `loader_system_ms_per_image`), the share of samples in which two of them were on one
core (`core_shared_pct`) and the cores each was on most (`cores`). Writes OUT/runs.csv (one row per run) and
OUT/summary.csv (per variant: mean, CV, 95 % CI, repeats needed for +-3 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
from peer_train_py import run_train_py  # a sibling benchmark: on sys.path when this file runs as a script

import colloc_kit
from colloc_kit import events
from colloc_kit.analysis import figures
from colloc_kit.spec import JobSpec

JOBS = {"small": {"model": "resnet26", "image_size": 32, "amp": "bf16", "batch_size": 128, "channels_last": True,
                  "warmup_steps": 30},
        "seed": {"model": "timm.resnet26", "dataset": "imagefolder", "recipe": "seed", "amp": "off", "batch_size": 128,
                 "warmup_steps": 10}}
PLACEMENTS = {"small": "pinned", "seed": "unpinned"}
VARIANTS = ("kit", "no-monitor", "gc-off", "pinned", "expandable", "no-zygote", "standalone", "train.py", "workers-12",
            "neighbour")
NEIGHBOURS = 7  # the `neighbour` variant: copies of the job training on GPU 1 (another lane's naive x7 cell)


class TreeSampler(threading.Thread):
    """Once a second, the CPU seconds of this process's descendants: the training process (the parent of the loader
    workers, childless processes with one parent) and its loader workers, and the cores they were last on.

    >>> sampler = TreeSampler(); sampler.start()
    >>> sampler.stop().split(images_per_s=100.0, seconds=10.0)["cores"] is None  # nothing ran under it
    True
    """

    def __init__(self, interval_s: float = 1.0):
        super().__init__(daemon=True)
        self.interval_s, self._done = interval_s, threading.Event()
        self.samples: list[tuple[float, dict[int, tuple[str, float, float, int]]]] = []  # t, pid: role, user, sys, core

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            try:
                leaves_by_parent: dict[int, list[psutil.Process]] = {}
                for proc in psutil.Process().children(recursive=True):
                    if not proc.children():
                        leaves_by_parent.setdefault(proc.ppid(), []).append(proc)
                parent, loaders = max(leaves_by_parent.items(), key=lambda item: len(item[1]), default=(0, []))
                if len(loaders) < 2:
                    continue
                seen = {}
                for role, proc in [("train", psutil.Process(parent)), *(("loader", proc) for proc in loaders)]:
                    times = proc.cpu_times()
                    seen[proc.pid] = (role, times.user, times.system, proc.cpu_num())
                self.samples.append((time.time(), seen))
            except psutil.Error:  # a process that just left
                continue

    def stop(self) -> TreeSampler:
        self._done.set()
        self.join()
        return self

    def split(self, images_per_s: float, seconds: float) -> dict:
        """CPU ms per image of the training process and of its loader workers, user and system, over the last 3/4 of
        `seconds` that the sampler saw them (inside the measured window; each process from its first to its last
        sample there); the share of those samples with two of them on one core; and the core each was on most
        ("train core; loader cores")."""
        parts = [f"{role}_{kind}" for role in ("train", "loader") for kind in ("user", "system")]
        if not self.samples:
            return {**{f"{part}_ms_per_image": None for part in parts}, "core_shared_pct": None, "cores": None}
        span = [(t, seen) for t, seen in self.samples if t >= self.samples[-1][0] - 0.75 * seconds]
        cpu_per_s = dict.fromkeys(parts, 0.0)
        modal_core = {}
        for pid in {pid for _, seen in span for pid in seen}:
            track = [(t, seen[pid]) for t, seen in span if pid in seen]
            (t0, (role, user0, system0, _)), (t1, (_, user1, system1, _)) = track[0], track[-1]
            if t1 > t0:
                cpu_per_s[f"{role}_user"] += (user1 - user0) / (t1 - t0)
                cpu_per_s[f"{role}_system"] += (system1 - system0) / (t1 - t0)
            cores = [core for _, (_, _, _, core) in track]
            modal_core[pid] = (role, max(set(cores), key=cores.count))
        shared = [len({core for *_, core in seen.values()}) < len(seen) for _, seen in span]
        train = [core for role, core in modal_core.values() if role == "train"]
        loaders = sorted(core for role, core in modal_core.values() if role == "loader")
        return {**{f"{part}_ms_per_image": 1000 * cpu_per_s[part] / images_per_s for part in parts},
                "core_shared_pct": 100 * sum(shared) / len(shared),
                "cores": f"{','.join(map(str, train))}; {','.join(map(str, loaders))}"}


def host_counters() -> tuple[float, float]:
    cpu = psutil.cpu_times()
    return getattr(cpu, "steal", 0.0), (psutil.cpu_freq().current if psutil.cpu_freq() else float("nan"))


def run_variant(variant: str, repeat: int, job: dict, placement: str, out: Path, gc_dir: Path,
                timm: Path | None) -> dict:
    """One run of `job` alone with `variant`'s one change, in its own experiment folder (a folder already holding
    the cell would be resumed, not run again)."""
    env_before = dict(os.environ)
    affinity = os.sched_getaffinity(0)
    neighbours: list[subprocess.Popen] = []
    try:
        if variant == "gc-off":
            os.environ["PYTHONPATH"] = f"{gc_dir}:{os.environ.get('PYTHONPATH', '')}"
        if variant == "expandable":
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        if variant == "no-zygote":
            os.environ["COLLOC_KIT_ZYGOTE"] = "0"
        if variant == "pinned":
            os.sched_setaffinity(0, sorted(affinity)[2:6])
        if variant == "workers-12":
            job = {**job, "workers": 12}
        if variant == "neighbour":
            neighbours = start_neighbours(job)
        steal0, freq0 = host_counters()
        t0 = time.time()
        cpu_ms_per_image = None
        sampler = TreeSampler()
        sampler.start()
        if variant == "standalone":
            rate, sm_clock = standalone(job, out)
        elif variant == "train.py":
            rate, sm_clock = train_py(timm, job, out, repeat), None
        else:
            res = colloc_kit.run([job], mode="exclusive", copies=1, out=out, name=f"{variant}-{repeat}",
                                 placement=placement,
                                 monitor=variant != "no-monitor", progress=False)
            rate = float(res.jobs["images_per_s"].iloc[0])
            sm_clock = float(res.jobs["sm_clock_mhz_mean"].iloc[0]) if "sm_clock_mhz_mean" in res.jobs else None
            cpu_ms_per_image = window_cpu_ms_per_image(res)
        steal1, freq1 = host_counters()
        return {"variant": variant, "images_per_s": rate, "wall_s": time.time() - t0, "cpu_steal_s": steal1 - steal0,
                "cpu_freq_mhz": (freq0 + freq1) / 2, "sm_clock_mhz": sm_clock, "cpu_ms_per_image": cpu_ms_per_image,
                **sampler.stop().split(rate, job["seconds"])}
    finally:
        for proc in neighbours:  # each in a session of its own, with its loader workers
            os.killpg(proc.pid, 9)
            proc.wait()
        os.environ.clear()
        os.environ.update(env_before)
        os.sched_setaffinity(0, affinity)


def start_neighbours(job: dict) -> list[subprocess.Popen]:
    """NEIGHBOURS copies of `job` training on GPU 1 (one worker process each, no barrier, an hour's budget), past
    their start-up when this returns; the caller kills them."""
    argv = JobSpec(**{**job, "seconds": 3600.0}).to_argv()
    procs = [subprocess.Popen([sys.executable, "-m", "colloc_kit.worker", *argv, "--job-id", f"neighbour{i}"],
                              stdout=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"}) for i in range(NEIGHBOURS)]
    time.sleep(20)  # imports, build, cuDNN autotuning: training by then
    return procs


def window_cpu_ms_per_image(res: colloc_kit.Results) -> float | None:
    """The host's busy CPU time per trained image over the lone job's window (the run's `host_cpu_util_pct_mean`; on
    a host running nothing else, the job's own cost); None without host samples (the monitor off)."""
    busy_pct = res.runs["host_cpu_util_pct_mean"].iloc[0]
    if pd.isna(busy_pct):
        return None
    return 1000 * busy_pct / 100 * psutil.cpu_count() / res.jobs["images_per_s"].iloc[0]


def standalone(job: dict, out: Path) -> tuple[float, None]:
    out.mkdir(parents=True, exist_ok=True)
    log = out / f"standalone-{time.time():.0f}.events.jsonl"
    with open(log, "w") as stdout:
        subprocess.run([sys.executable, "-m", "colloc_kit.worker", *JobSpec(**job).to_argv()], stdout=stdout,
                       check=True)
    end = [e for e in map(events.parse, log.read_text().splitlines()) if e and e["type"] == events.END][-1]
    return end["images_per_s"], None


def train_py(timm: Path | None, job: dict, out: Path, repeat: int) -> float:
    """The seed job's workload run by timm's train.py, alone, its images/s over a window of the job's seconds."""
    assert timm is not None, "main() asks for --timm with the train.py variant"
    cell = run_train_py(timm, Path(job["data_root"]).parent, "r26-fp32", "naive", 1, warmup_s=8.0,
                        seconds=job["seconds"], out=out, repeat=repeat)
    if cell["aggregate_images_per_s"] is None:  # recorded as a gap, and the next run goes on
        print(f"train.py measured nothing: {cell['note']}", file=sys.stderr)
        return float("nan")
    return cell["aggregate_images_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--job", choices=sorted(JOBS), default="small")
    parser.add_argument("--data-root", help="the seed job's image folder (colloc-kit data make cifar10 ...)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timm", type=Path, help="a checkout of timm's repository, for the train.py variant")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/peer/results/h100-lone-swing/host-bound"))
    args = parser.parse_args()
    if args.job == "seed" and not args.data_root:
        parser.error("--job seed trains on an image folder: give --data-root (colloc-kit data make cifar10 ...)")
    if "train.py" in args.variants.split(",") and (args.job != "seed" or args.timm is None):
        parser.error("the train.py variant runs the seed job: give --job seed and --timm (a checkout of timm)")
    job = {**JOBS[args.job], "seconds": args.seconds, "device": args.device,
           **({"data_root": args.data_root} if args.job == "seed" else {})}
    gc_dir = Path(tempfile.mkdtemp())
    (gc_dir / "sitecustomize.py").write_text("import gc\ngc.disable()\n")
    rows = []
    for repeat in range(args.repeats):  # interleaved: every variant once per round, so drift hits all alike
        for variant in args.variants.split(","):
            rows.append({"repeat": repeat, **run_variant(variant, repeat, job, PLACEMENTS[args.job],
                                                         args.out / "runs", gc_dir, args.timm)})
            print(json.dumps(rows[-1]), flush=True)
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "runs.csv", index=False)
    summary = []
    for variant, group in frame.groupby("variant", sort=False):
        mean, ci = figures.ci95(group["images_per_s"])
        cv = group["images_per_s"].std() / mean
        summary.append({"variant": variant, "runs": len(group), "mean_images_per_s": mean,
                        "min": group["images_per_s"].min(), "max": group["images_per_s"].max(), "cv_pct": 100 * cv,
                        "ci95_pct": 100 * ci / mean, "repeats_for_3pct": int((2 * cv / 0.03) ** 2) + 1,
                        "cpu_steal_s": group["cpu_steal_s"].mean(), "sm_clock_mhz": group["sm_clock_mhz"].mean(),
                        **{column: group[column].mean() for column in (
                            "cpu_ms_per_image", "train_user_ms_per_image", "train_system_ms_per_image",
                            "loader_user_ms_per_image", "loader_system_ms_per_image", "core_shared_pct")}})
    table = pd.DataFrame(summary)
    table.to_csv(args.out / "summary.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))


if __name__ == "__main__":
    main()

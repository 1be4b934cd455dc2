"""The peer check: the kit beside the study's own training program, timm's `train.py` (the script the seed artifact
vendored), on the same workload, machine and data, alone and collocated, so the kit's figures can be held against
the program the study measured with. Nothing of train.py is in this repository: give a checkout of timm's repository
(its `train.py` and `timm/` package are run from there, and the kit's jobs import that same `timm`).

Each workload runs, for each program, naive x1 (the lone job, the denominator of every gain; `--lone-repeats` times,
the programs alternating, since a lone job swings between runs), then naive and MPS at the given copy counts.
train.py gets the study's flags (`--model`, `--data-dir`, `--warmup-epochs 0`, `--batch-size`, and
`--amp --amp-dtype bfloat16` for bf16), its copies share the GPU through the kit's own modes (the same private MPS
daemon), and its throughput is read from its log lines (`Train: epoch [step/steps]`), each
stamped on arrival: a copy's images/s over one window common to all copies, after a warm-up. The kit runs the same
cells with the seed recipe (`colloc-kit run ... --recipe seed`) and the given placements.

With `--host-matched`, each program also runs the host-matched lone row of every copy count N: one job given the
loader workers N copies had together (train.py's `--workers` = N x 4, the kit's `--workers` the same), so the
host-matched baseline (docs/attribution.md) is held against the study's own program; `compare` then gives each
collocated cell's GPU's part (its aggregate over that row's images/s) and the row's host's part (its gain).

    python3 benchmarks/peer/peer_train_py.py run --timm ~/pytorch-image-models --data seed-data --out /tmp/peer
    python3 benchmarks/peer/peer_train_py.py compare /tmp/peer        # table.md and table.csv in /tmp/peer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import colloc_kit
from colloc_kit.modes import make_mode
from colloc_kit.spec import ModeSpec

__all__ = ["WORKLOADS", "compare", "difference_ci", "kit_name", "kit_row", "main", "plan", "run_train_py"]

WORKLOADS = {"r26-fp32": ("resnet26", "cifar10", "off"), "r26-bf16": ("resnet26", "cifar10", "bf16"),
             "r50-in64": ("resnet50", "imagenet64", "off")}
BATCH = 128
STEP_LINE = re.compile(r"Train: (\d+) \[\s*(\d+)/(\d+)")
LOG_INTERVAL = 5  # train.py logs every this many steps (its --log-interval)
WORKERS = 4  # each job's loader workers, as the study ran train.py (the host-matched lone row: N x this)


def _workers_tag(workers: int) -> str:
    """A cell's folder suffix: '' for the study's workers, '-w12' for a host-matched lone row."""
    return "" if workers == WORKERS else f"-w{workers}"


def run_train_py(timm: Path, data: Path, workload: str, mode: str, copies: int, warmup_s: float, seconds: float,
                 out: Path, repeat: int = 1, workers: int = WORKERS) -> dict:
    """One cell of train.py: `copies` copies under `mode` (the kit's mode, so MPS is the same private daemon), each
    with `workers` loader workers; returns the copies' images/s over the common window and the aggregate."""
    model, dataset, amp = WORKLOADS[workload]
    folder = out / "train_py" / f"{workload}-{mode}-x{copies}{_workers_tag(workers)}" / f"repeat-{repeat}"
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(timm / "train.py"), "--data-dir", str(data / dataset), "--model", model,
               "--batch-size", str(BATCH), "--warmup-epochs", "0", "--epochs", "100", "--workers", str(workers),
               "--log-interval", str(LOG_INTERVAL), "--output", str(folder)]
    if amp == "bf16":
        command += ["--amp", "--amp-dtype", "bfloat16"]
    with make_mode(ModeSpec(mode), workdir=folder / "mode", gpu=0, device="cuda") as sharing:
        stamps: list[list[tuple[float, int]]] = [[] for _ in range(copies)]
        procs, pumps = [], []
        for i, slot in enumerate(sharing.slots(copies)):
            env = {**os.environ, **slot.env, "PYTHONPATH": f"{timm}:{os.environ.get('PYTHONPATH', '')}"}
            proc = subprocess.Popen([*command, "--seed", str(i)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
            procs.append(proc)
            pumps.append(threading.Thread(target=_stamp, args=(proc, stamps[i], folder / f"copy{i}.log"), daemon=True))
            pumps[-1].start()
        try:
            start = _all_training(procs, stamps)
            window = (start + warmup_s, start + warmup_s + seconds)
            while time.time() < window[1] + 2 and all(p.poll() is None for p in procs):
                time.sleep(0.2)
        except RuntimeError as exc:  # e.g. 7 copies that do not fit: recorded, and the next cell runs
            window, note = None, str(exc)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, 15)
            for proc in procs:
                proc.wait(timeout=60)
    cell = {"program": "train.py", "placement": "unpinned", "workload": workload, "mode": mode, "copies": copies,
            "repeat": repeat, "workers": workers}
    if window is not None:
        try:
            rates = [_rate(s, window) for s in stamps]
        except RuntimeError as exc:  # e.g. the window ran into an epoch's end: recorded, and the next cell runs
            window, note = None, str(exc)
    if window is None:
        return {**cell, "aggregate_images_per_s": None, "job_rates": "[]", "note": note}
    return {**cell, "aggregate_images_per_s": sum(rates), "job_rates": json.dumps([round(r, 1) for r in rates])}


def _stamp(proc: subprocess.Popen, stamps: list[tuple[float, int]], log: Path) -> None:
    """Each step line of a train.py copy as (arrival time, images trained so far); the whole output to `log`."""
    assert proc.stdout is not None
    with open(log, "w") as copy:
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            copy.write(line)
            found = STEP_LINE.search(line)
            if found:
                epoch, step, steps = map(int, found.groups())
                stamps.append((time.time(), (epoch * steps + step + 1) * BATCH))


def _all_training(procs: list[subprocess.Popen], stamps: list[list[tuple[float, int]]]) -> float:
    """Wait until every copy has logged a step; when that was. A copy that ended before is an error."""
    deadline = time.time() + 600
    while not all(stamps):
        if any(p.poll() is not None for p in procs) or time.time() > deadline:
            raise RuntimeError("not every copy trained: a copy ended, or none trained within 600 s (see its log)")
        time.sleep(0.1)
    return time.time()


def _rate(stamps: list[tuple[float, int]], window: tuple[float, float]) -> float:
    """Images/s of one copy over `window`, its images counted at each edge by linear interpolation between log lines."""
    def images_at(t: float) -> float:
        for (t0, n0), (t1, n1) in zip(stamps, stamps[1:]):
            if t0 <= t <= t1:
                return n0 + (n1 - n0) * (t - t0) / (t1 - t0)
        raise RuntimeError(f"no log lines around {t:.1f}: the copy did not train through the window (train.py "
                           "pauses at each epoch's end; give the data more images, or a shorter --seconds)")

    return (images_at(window[1]) - images_at(window[0])) / (window[1] - window[0])


def run_kit(data: Path, workload: str, mode: str, copies: int, placement: str, seconds: float, out: Path,
            repeat: int = 1, workers: int = WORKERS) -> dict:
    """Repeat `repeat` of one cell of the kit (`copies` jobs under `mode`) with the seed recipe and `placement`, in
    its own experiment folder (which keeps the earlier repeats); a cell that did not complete (e.g. its copies do not
    fit) is returned with its status."""
    model, dataset, amp = WORKLOADS[workload]
    name = kit_name(workload, placement, mode, copies, workers)
    subprocess.run([sys.executable, "-m", "colloc_kit.cli", "run", "--model", f"timm.{model}", "--dataset",
                    "imagefolder", "--data-root", str(data / dataset), "--recipe", "seed", "--amp", amp,
                    "--batch-size", str(BATCH), "--seconds", str(seconds), "--warmup-steps", "10", "--placement",
                    placement, "--mode", mode, "--copies", str(copies), "--repeats", str(repeat), "--workers",
                    str(workers), "--name", name,
                    "--out", str(out / "kit"), "--quiet"], check=False)
    return kit_row(out / "kit" / name, {"program": "kit", "placement": placement, "workload": workload,
                                        "mode": mode, "copies": copies, "repeat": repeat, "workers": workers})


def kit_name(workload: str, placement: str, mode: str, copies: int, workers: int = WORKERS) -> str:
    """The kit's experiment folder of one cell."""
    return f"peer-{workload}-{placement}-{mode}-x{copies}{_workers_tag(workers)}"


def kit_row(folder: Path, cell: dict) -> dict:
    """`cell` with the aggregate of the kit's run (its `repeat`, the last where it has none) in `folder` as today's
    `colloc_kit.load` computes it; a cell that did not complete (e.g. its copies do not fit) with its status."""
    results = colloc_kit.load(folder)
    runs = results.runs
    if pd.notna(cell.get("repeat")) and not runs.empty:
        runs = runs[runs["repeat"] == cell["repeat"] - 1]  # the kit counts repeats from 0
    if runs.empty:
        return {**cell, "aggregate_images_per_s": None, "job_rates": "[]", "note": "no run recorded: see the log"}
    run = runs.iloc[-1]
    if run["status"] != "complete":
        return {**cell, "aggregate_images_per_s": None, "job_rates": "[]", "note": f"the kit's run {run['status']}"}
    rates = results.jobs[results.jobs["run_id"] == run["run_id"]]["images_per_s"]
    return {**cell, "aggregate_images_per_s": float(run["aggregate_images_per_s"]),
            "job_rates": json.dumps([round(x, 1) for x in rates])}


def unpacked_kit(out: Path) -> Path:
    """The kit's runs of a committed session (a SESSION folder of benchmarks/peer/results/h100/, whose raw files are in
    the set's runs.tgz as SESSION/kit/...), unpacked into a temporary folder; `out`/kit (absent) where no archive holds
    them."""
    for archive in (out.parent / "runs.tgz", out.parent.parent / "runs.tgz"):
        if archive.is_file():
            prefix = out.resolve().relative_to(archive.parent.resolve()).as_posix() + "/kit/"
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
                if members:
                    target = Path(tempfile.mkdtemp(prefix="peer-kit-"))
                    tar.extractall(target, members=members, filter="data")
                    return target / prefix
    return out / "kit"


def compare(out: Path) -> pd.DataFrame:
    """One row per (workload, program, placement): lone images/s, and per collocated cell its aggregate and gain,
    with each kit figure's difference from train.py's; written to table.csv and table.md. A cell measured more than
    once (the lone job's repeats) shows its median and range, and with 3 repeats or more of both programs the
    difference's 95 % CI (`difference_ci`). Where the kit's runs are beside results.jsonl
    (OUT/kit), the kit's rows are computed from them again, with today's figures."""
    rows = pd.read_json(out / "results.jsonl", lines=True)
    rows["workers"] = rows["workers"].fillna(WORKERS).astype(int) if "workers" in rows else WORKERS  # older rows: 4
    kit = out / "kit" if (out / "kit").is_dir() else unpacked_kit(out)
    if kit.is_dir():
        rows = pd.DataFrame([kit_row(kit / kit_name(r["workload"], r["placement"], r["mode"], r["copies"],
                                                    r["workers"]), r)
                             if r["program"] == "kit" else r for r in rows.to_dict("records")])
    keys = ["workload", "program", "placement", "mode", "copies", "workers"]
    repeats = rows.dropna(subset=["aggregate_images_per_s"]).groupby(keys)["aggregate_images_per_s"].apply(list)
    rows = rows.groupby(keys, as_index=False).agg(
        aggregate_images_per_s=("aggregate_images_per_s", "median"), n=("aggregate_images_per_s", "count"),
        low=("aggregate_images_per_s", "min"), high=("aggregate_images_per_s", "max"))
    lone_rows = rows[(rows["mode"] == "naive") & (rows["copies"] == 1)]
    lone = lone_rows[lone_rows["workers"] == WORKERS].set_index(["workload", "program", "placement"])
    matched = lone_rows.set_index(["workload", "program", "placement", "workers"])["aggregate_images_per_s"]
    rows["gain"] = [r.aggregate_images_per_s / lone.loc[(r.workload, r.program, r.placement),
                                                       "aggregate_images_per_s"] for r in rows.itertuples()]
    rows["gpu_part"] = [r.aggregate_images_per_s / matched.get((r.workload, r.program, r.placement,
                                                                r.copies * r.workers), float("nan"))
                        if r.copies > 1 else float("nan") for r in rows.itertuples()]  # over the host-matched row
    peer = rows[rows["program"] == "train.py"].set_index(["workload", "mode", "copies", "workers"])[
        "aggregate_images_per_s"]
    rows["vs_train_py_pct"] = [100 * (r.aggregate_images_per_s / peer.get((r.workload, r.mode, r.copies, r.workers),
                                                                          float("nan")) - 1) for r in rows.itertuples()]
    cis = [difference_ci(repeats.get((r.workload, r.program, r.placement, r.mode, r.copies, r.workers), []),
                         repeats.get((r.workload, "train.py", "unpinned", r.mode, r.copies, r.workers), []))
           if r.program == "kit" else (float("nan"), float("nan")) for r in rows.itertuples()]
    rows["vs_train_py_ci_low_pct"], rows["vs_train_py_ci_high_pct"] = zip(*cis)
    rows.to_csv(out / "table.csv", index=False)
    shown = rows.assign(cell=rows["mode"] + " x" + rows["copies"].astype(str)
                        + rows["workers"].map(lambda w: "" if w == WORKERS else f", {w} workers (host-matched)"),
                        gpu_part=rows["gpu_part"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
                        images_per_s=[_shown(r) for r in rows.itertuples()],
                        gain=rows["gain"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
                        vs_train_py=[_difference_shown(r) for r in rows.itertuples()])
    columns = ["workload", "cell", "program", "placement", "images_per_s", "gain", "vs_train_py"]
    if rows["gpu_part"].notna().any():  # a host-matched row was run: the split of each gain it covers
        columns.insert(6, "gpu_part")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown[columns].itertuples(index=False)]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return rows


def difference_ci(kit: list[float], peer: list[float], min_repeats: int = 3) -> tuple[float, float]:
    """The 95 % CI (percentile bootstrap, in %) of the kit's median over train.py's, from each program's repeats of
    one cell; NaNs where either has fewer than `min_repeats`. A target of +-3 % is met where it lies inside +-3 %.

    >>> low, high = difference_ci([100, 102, 98], [100, 101, 99])
    >>> -5 < low <= 0 <= high < 5
    True
    """
    if min(len(kit), len(peer)) < min_repeats:
        return float("nan"), float("nan")
    found = stats.bootstrap((kit, peer), lambda k, p: 100 * (np.median(k) / np.median(p) - 1), vectorized=False,
                            n_resamples=2000, method="percentile", rng=np.random.default_rng(0))
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def _difference_shown(cell) -> str:
    """The kit's difference from train.py as the table shows it, with its 95 % CI where the repeats give one."""
    if pd.isna(cell.vs_train_py_pct):
        return ""
    if pd.isna(cell.vs_train_py_ci_low_pct):
        return f"{cell.vs_train_py_pct:+.1f} %"
    low, high = cell.vs_train_py_ci_low_pct, cell.vs_train_py_ci_high_pct
    return f"{cell.vs_train_py_pct:+.1f} % (95 % CI {low:+.1f} to {high:+.1f})"


def _shown(cell) -> str:
    """A cell's images/s as the table shows it: the figure, or the median and range of its repeats."""
    if pd.isna(cell.aggregate_images_per_s):
        return "did not run (see results.jsonl)"
    if cell.n == 1:
        return f"{cell.aggregate_images_per_s:,.0f}"
    return f"{cell.aggregate_images_per_s:,.0f} (median of {cell.n}: {cell.low:,.0f}-{cell.high:,.0f})"


def plan(modes: list[str], copies: list[int], lone_repeats: int, host_matched: bool) -> list[tuple]:
    """The cells of one workload, in order, as (mode, copies, repeat, loader workers): the lone repeats, with
    `host_matched` a lone row per copy count with that many copies' workers, then the collocated cells.

    >>> plan(["mps"], [3], 1, True)
    [('naive', 1, 1, 4), ('naive', 1, 1, 12), ('mps', 3, 1, 4)]
    """
    cells = [("naive", 1, r, WORKERS) for r in range(1, lone_repeats + 1)]
    cells += [("naive", 1, 1, n * WORKERS) for n in copies if host_matched]
    return cells + [(m, n, 1, WORKERS) for m in modes for n in copies]


def main(argv: list[str] | None = None) -> int:
    """`run` measures (appending to OUT/results.jsonl as it goes), `compare` tabulates."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--timm", type=Path, required=True, help="a checkout of timm's repository (holds train.py)")
    run.add_argument("--data", type=Path, required=True, help="holds cifar10/ and imagenet64/ (colloc-kit data make)")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--workloads", default=",".join(WORKLOADS))
    run.add_argument("--modes", default="naive,mps")
    run.add_argument("--copies", default="3,7", help="collocated copy counts (\"\": the lone cell only)")
    run.add_argument("--placements", default="unpinned", help="the kit's placements to run (unpinned,pinned)")
    run.add_argument("--seconds", type=float, default=15.0, help="the measured window of every cell")
    run.add_argument("--warmup-s", type=float, default=8.0, help="train.py's seconds after all copies train")
    run.add_argument("--lone-repeats", type=int, default=1, help="runs of each program's lone cell, alternating")
    run.add_argument("--host-matched", action="store_true",
                     help="also a lone row per copy count N with N x 4 loader workers (train.py's --workers)")
    sub.add_parser("compare").add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        print(compare(args.out).to_string(index=False))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the copies are killed and MPS quits (finally)
    modes, copies = args.modes.split(","), [int(c) for c in args.copies.split(",") if c]
    with open(args.out / "results.jsonl", "a") as results:
        for workload in args.workloads.split(","):
            for mode, n, repeat, workers in plan(modes, copies, args.lone_repeats, args.host_matched):
                measures = [partial(run_train_py, args.timm, args.data, workload, mode, n, args.warmup_s,
                                    args.seconds, args.out, repeat, workers)]
                measures += [partial(run_kit, args.data, workload, mode, n, placement, args.seconds, args.out, repeat,
                                     workers) for placement in args.placements.split(",")]
                for measure in measures[::-1] if repeat % 2 == 0 else measures:
                    row = measure()
                    results.write(json.dumps(row) + "\n")
                    results.flush()
                    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

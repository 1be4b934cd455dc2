"""The peer's cells for the inference benchmark (issue 51): `peer_serve.py serve` beside `copies` of `peer_serve.py
train`, under the kit's sharing mode (the same private MPS daemon and thread shares as the kit's cells; exclusive runs
the server alone), at the rate the kit's cell was offered; and the table that holds the kit's p50/p99 against it.

The peer's processes sit on the host's cores as the kit's jobs do (the experiment's `placement`). The peer's
latencies are read with the kit's percentile rule (`colloc_kit.analysis.latency.percentile_ci`), so the two
programs' figures differ only by what they measured. A cell where either answered less than 90 % of the requests that
arrived in its window (`answered_share`, `latency.STARVED_SERVED_SHARE`; not the rate offered: each program draws its
own Poisson arrivals) is `answered_short`: its latencies are a queue's growth, not a server's, and are not compared
(`within_10pct` empty). On the CPU (`--tiny`) every figure is the tiny model's:

    >>> kit = pd.DataFrame([{"served": "m", "mix": "x", "mode_label": "naive", "repeat": 0, "rate_per_s": 100.0,
    ...                      "requests_per_s": 99.0, "answered_share": 0.99, "latency_p50_ms": 10.5,
    ...                      "latency_p99_ms": 30.0, "train_images_per_s": 90.0}])
    >>> peer = pd.DataFrame([{"served": "m", "mix": "x", "mode_label": "naive", "repeat": 0,
    ...                       "peer_requests_per_s": 88.0, "peer_answered_share": 1.0, "peer_p50_ms": 10.0,
    ...                       "peer_p99_ms": 30.0, "peer_train_images_per_s": 100.0}])
    >>> row = kit_vs_peer(kit, peer).iloc[0]
    >>> float(round(row["p50_kit_over_peer"], 3)), float(row["p99_kit_over_peer"]), bool(row["within_10pct"])
    (0.05, 0.0, True)
    >>> bool(row["answered_short"])
    False
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from colloc_kit.analysis.latency import PARTS, STARVED_SERVED_SHARE, percentile_ci
from colloc_kit.modes import make_mode
from colloc_kit.predict.serve_advise import mix_label
from colloc_kit.supervise import host_shares, thread_env
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.stats import ci95, geometric_ci95

__all__ = ["PEER", "by_mode", "by_order", "kit_vs_peer", "peer_cell", "peer_figures", "peer_ran", "peer_setting",
           "setting_keys"]

PEER = Path(__file__).resolve().with_name("peer_serve.py")
AGREE = 0.10  # the target: the kit's p50 and p99 within 10 % of the peer's
PEER_COLUMNS = ["peer_p50_ms", "peer_p99_ms", "peer_requests_per_s", "peer_answered_share", "peer_device_time",
                *(f"peer_{name}_p50_ms" for name in PARTS), "peer_started_at",
                "peer_error"]  # every row has them (NaN: the cell failed)


def _command(role: str, job: JobSpec, out: Path, seconds: float) -> list[str]:
    """peer_serve.py's command line for a kit job's settings (its model, request or batch size, image side, amp)."""
    command = [sys.executable, str(PEER), role, "--gate", "--model", job.model, "--device", job.device,
               "--image-size", str(job.image_size), "--batch-size", str(job.batch_size), "--amp", job.amp,
               "--seconds", str(seconds), "--out", str(out)]
    if role == "serve":
        command += ["--rate", str(job.rate_per_s), "--max-batch", str(job.max_batch),
                    "--max-delay-ms", str(job.max_delay_ms), "--seed", str(job.seed)]
    return command


def peer_cell(serve: JobSpec, train: JobSpec, copies: int, mode: ModeSpec, folder: Path, placement: str = "pinned"
              ) -> dict:
    """Run the peer's server beside `copies` training loops under `mode` (exclusive: the server alone), all started
    together once warm, each placed on the host's cores as the kit places its jobs (`placement`: pinned, a block of
    cores and as many intra-op threads each; unpinned: where the OS puts them); the server's JSON, with
    `train_images_per_s` (the training loops' sum) and `started_at` (Unix time, before its processes start, as a kit
    run's manifest has it) added."""
    folder.mkdir(parents=True, exist_ok=True)
    device = serve.device
    started = time.time()
    with make_mode(mode, workdir=folder / "mode", gpu=0, device=device) as sharing:
        n_train = 0 if sharing.sequential else copies
        slots = sharing.slots(1 + n_train)
        commands = [_command("serve", serve, folder / "serve.json", serve.seconds or 4.0)]
        commands += [_command("train", train, folder / f"train-{i}.json", 10 * (serve.seconds or 4.0) + 60)
                     for i in range(n_train)]
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}  # MPS where slots say
        procs = []
        for cmd, slot, cores in zip(commands, slots, host_shares(len(commands), placement)):
            procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                          env={**inherited, **thread_env(cores), **slot.env}))
            if cores is not None:
                os.sched_setaffinity(procs[-1].pid, cores)
        try:
            for proc in procs:  # each says `ready` once warm
                if proc.stdout is None or proc.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"the peer did not get ready: {proc.args}")
            for proc in procs:
                _say(proc, "go")
            procs[0].wait(timeout=600)
            for proc in procs[1:]:
                _say(proc, "stop")
                proc.wait(timeout=120)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
    result = json.loads((folder / "serve.json").read_text())
    trained = [json.loads((folder / f"train-{i}.json").read_text())["images_per_s"] for i in range(n_train)]
    return {**result, "started_at": started, "train_images_per_s": sum(trained) if trained else None}


def setting_keys(spec: ExperimentSpec, mode: ModeSpec) -> dict:
    """The keys of the kit's frontier row for `spec`'s cell under `mode` (its one copy count): served model, mix,
    setting.

    >>> serve = JobSpec(model="vit_b_16", role="serve", rate_per_s=40.0)
    >>> spec = ExperimentSpec(jobs=[serve, JobSpec(model="resnet50")], copies=[2])
    >>> setting_keys(spec, ModeSpec("mps"))
    {'served': 'vit_b_16', 'mix': 'resnet50 x2', 'mode_label': 'mps'}
    """
    serve, train = spec.jobs
    return {"served": serve.model, "mix": mix_label([train.model] * spec.copies[0]), "mode_label": mode.label}


def _cell(spec: ExperimentSpec, index: int, folder: Path, launch: int) -> tuple[Path, dict]:
    """The folder of the peer's cell beside launch `launch` of `spec`'s `index`-th mode, and what it is asked (the
    first launch's cell keeps the name and the question it had before launches were paired: folders of earlier calls
    are read as they are)."""
    serve, _ = spec.jobs
    keys = setting_keys(spec, spec.modes[index])
    asked = {**keys, "copies": spec.copies[0], "rate_per_s": serve.rate_per_s, "seconds": serve.seconds}
    if launch == 0:
        return folder / f"{spec.name}-{index}", asked
    return folder / f"{spec.name}-{index}-r{launch}", {**asked, "launch": launch}


def peer_ran(spec: ExperimentSpec, index: int, folder: Path, launch: int = 0) -> dict | None:
    """What the peer's cell beside launch `launch` of `spec`'s `index`-th mode gave, if its `cell.json` under
    `folder` says it ran as asked; else None."""
    cell, asked = _cell(spec, index, folder, launch)
    done = cell / "cell.json"
    ran = json.loads(done.read_text()) if done.exists() else {}
    return ran["result"] if ran.get("asked") == asked else None


def peer_setting(spec: ExperimentSpec, index: int, folder: Path, launch: int = 0) -> dict:
    """The peer's cell beside launch `launch` (the kit's `repeat`) of the kit's cell of `spec` under its `index`-th
    mode: the same served job and training job, copies and mode; a row keyed as the kit's, with `repeat` (a cell
    that failed says why in `peer_error`, and the benchmark goes on). A cell that ran as asked (`peer_ran`) is read,
    not run again: the benchmark resumes a folder carried from an earlier call."""
    serve, train = spec.jobs
    keys = {**setting_keys(spec, spec.modes[index]), "repeat": launch}
    result = peer_ran(spec, index, folder, launch)
    if result is None:
        cell, asked = _cell(spec, index, folder, launch)
        try:
            result = peer_cell(serve, train, spec.copies[0], spec.modes[index], cell, spec.placement)
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
            return {**keys, "peer_error": f"{type(error).__name__}: {error}"}
        cell.mkdir(parents=True, exist_ok=True)
        (cell / "cell.json").write_text(json.dumps({"asked": asked, "result": result}))
    return {**keys, **peer_figures(result)}


def _say(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def peer_figures(result: dict) -> dict:
    """The peer's p50/p99 with the kit's rule and CI (unanswered requests at their wait so far), its requests/s, and
    the p50 of each part of a request's latency (queueing, host, device)."""
    rows = result["requests"]
    latencies = [1000 * (done - arrival) for arrival, _, done, _, _ in rows]
    latencies += [1000 * (result["ended_s"] - arrival) for arrival in result["unanswered"]]
    figures = {}
    for q in (50, 99):
        figures[f"peer_p{q}_ms"], figures[f"peer_p{q}_ms_lo"], figures[f"peer_p{q}_ms_hi"] = percentile_ci(
            latencies, q / 100)
    parts = {"queue": [1000 * (start - arrival) for arrival, start, _, _, _ in rows],
             "device": [device_ms for *_, device_ms, _ in rows],
             "host": [1000 * (done - start) - device_ms for _, start, done, device_ms, _ in rows]}
    figures.update({f"peer_{name}_p50_ms": percentile_ci(values, 0.5)[0] for name, values in parts.items()})
    window = result["window_s"]
    arrived = sum(row[0] < window for row in rows) + sum(arrival < window for arrival in result["unanswered"])
    answered = sum(row[0] < window and row[2] < window for row in rows)
    figures["peer_answered_share"] = answered / arrived if arrived else float("nan")
    return {**figures, "peer_requests_per_s": result["requests_per_s"], "peer_unanswered": len(result["unanswered"]),
            "peer_device_time": result["device_time"], "peer_train_images_per_s": result["train_images_per_s"],
            "peer_started_at": result.get("started_at")}  # none in a cell run before it was recorded


def kit_vs_peer(kit: pd.DataFrame, peer: pd.DataFrame) -> pd.DataFrame:
    """Per served model, mix, setting and launch (`repeat`: a peer cell is held against the kit's launch it ran
    beside): the kit's p50/p99 and the peer's, the kit's over the peer's minus one, which of the two cells ran first
    (`first`, from their start times), whether either program answered short of the rate offered and, where neither
    did, whether both are within the issue's 10 %."""
    keys = ["served", "mix", "mode_label", "repeat"]
    parts = [column for column in kit if column.endswith("_p50_ms") and column.split("_")[0] in PARTS
             or column.startswith("tail_")]  # the kit's latency parts, where the frontier carries them
    table = kit.reindex(columns=[*keys, "rate_per_s", "requests_per_s", "answered_share", "latency_p50_ms",
                                 "latency_p99_ms", "train_images_per_s", "started_at", *parts])
    table = table.merge(peer.reindex(columns=[*dict.fromkeys([*peer.columns, *PEER_COLUMNS])]), on=keys)
    for q in (50, 99):
        table[f"p{q}_kit_over_peer"] = table[f"latency_p{q}_ms"] / table[f"peer_p{q}_ms"] - 1
    started = table[["started_at", "peer_started_at"]].astype(float)
    table["first"] = (started["started_at"] < started["peer_started_at"]).map({True: "kit", False: "peer"}).where(
        started.notna().all(axis=1))  # none for a cell whose start was not recorded
    answered = table.reindex(columns=["answered_share", "peer_answered_share"]).min(axis=1)
    table["answered_short"] = ~(answered >= STARVED_SERVED_SHARE)  # unknown counts as short: not compared
    ratios = table[["p50_kit_over_peer", "p99_kit_over_peer"]].abs().round(9)  # 11 / 10 - 1 is 0.1 and a bit
    table["within_10pct"] = (ratios <= AGREE).all(axis=1).astype(object).where(~table["answered_short"])
    return table


def by_order(table: pd.DataFrame) -> pd.DataFrame:
    """Per order of a setting's two cells (`first`: kit or peer; `kit_vs_peer`'s rows), over the settings compared
    (neither answered short): how many, and the kit's p50 and p99 over the peer's (the mean of the settings' ratios,
    minus 1) with its 95 % CI. A difference that changes sign with the order is the GPU's state from one cell to the
    next, not the program.

    >>> table = pd.DataFrame({"first": ["kit", "peer", "kit", "peer"], "answered_short": False,
    ...                       "p50_kit_over_peer": [0.1, -0.1, 0.3, -0.3], "p99_kit_over_peer": 0.0})
    >>> by_order(table)[["first", "settings", "p50_kit_over_peer"]].round(3)
      first  settings  p50_kit_over_peer
    0   kit         2                0.2
    1  peer         2               -0.2
    """
    rows = []
    for first, part in table[~table["answered_short"].astype(bool)].groupby("first"):
        row: dict = {"first": first, "settings": len(part)}
        for q in (50, 99):
            row[f"p{q}_kit_over_peer"], row[f"p{q}_ci95"] = ci95(part[f"p{q}_kit_over_peer"])
        rows.append(row)
    return pd.DataFrame(rows, columns=["first", "settings", "p50_kit_over_peer", "p50_ci95", "p99_kit_over_peer",
                                       "p99_ci95"])


def by_mode(table: pd.DataFrame) -> pd.DataFrame:
    """Per sharing setting (`mode_label`), over its pairs compared (`kit_vs_peer`'s rows where neither answered
    short: every served model, mix and launch): how many, and the kit's p50, p99 and device-time p50 over the peer's
    as the geometric mean of the pairs' ratios minus 1, with its 95 % CI (`stats.geometric_ci95`, Student's t on the
    logarithms); `agrees`: the p50's and the p99's CI both inside the issue's 10 %. The issue's per-mode reading: a
    pair's two cells run a minute apart on a GPU whose time per batch moves from cell to cell, so one pair decides
    nothing, and the mean over a mode's pairs says whether the programs differ.

    >>> table = pd.DataFrame({"mode_label": ["mps", "mps", "mps"], "answered_short": False,
    ...                       "latency_p50_ms": [10.0, 11.0, 9.5], "peer_p50_ms": 10.0, "latency_p99_ms": 20.0,
    ...                       "peer_p99_ms": [20.0, 19.0, 21.0], "device_p50_ms": 8.0, "peer_device_p50_ms": 8.0})
    >>> row = by_mode(table).iloc[0]
    >>> int(row["pairs"]), round(float(row["p50_kit_over_peer"]), 3), bool(row["agrees"])
    (3, 0.015, False)
    """
    rows = []
    for mode, part in table[~table["answered_short"].astype(bool)].groupby("mode_label", sort=False):
        row: dict = {"mode_label": mode, "pairs": len(part)}
        for name, kit, peer in (("p50", "latency_p50_ms", "peer_p50_ms"), ("p99", "latency_p99_ms", "peer_p99_ms"),
                                ("device_p50", "device_p50_ms", "peer_device_p50_ms")):
            mean, low, high, *_ = geometric_ci95(part[kit] / part[peer])
            row.update({f"{name}_kit_over_peer": mean - 1, f"{name}_ci_low": low - 1, f"{name}_ci_high": high - 1})
        row["agrees"] = all(-AGREE <= row[f"{q}_ci_low"] and row[f"{q}_ci_high"] <= AGREE for q in ("p50", "p99"))
        rows.append(row)
    return pd.DataFrame(rows)

"""Issue 42's targets: an inference job beside training jobs, on one GPU (an H100), in about 8 minutes (issue 51's
peer and capacity cells about double that; `--no-peer --no-capacity` leave them out).

1. The kit's own cost: the inference job alone (closed loop, one client, one request at a time) against a plain
   PyTorch loop timing the same model and request size (copy in, forward, classes back, synchronised), each one
   process kept for all its windows and the two alternating in `--cost-rounds` pairs of `--cost-seconds` windows,
   seconds apart (`paired_windows`): p50 within 5 %. The rates offered below are 30 % of each model's capacity alone
   as measured here.
2. 2 inference models (ResNet-50, 4 images a request; ViT-B/16 from torchvision, 1 image a request, 197 tokens)
   x 3 training mixes (ResNet-50 x1, ResNet-50 x2, ViT-B/16 x1) x 4 settings (exclusive, naive, MPS, MPS with the
   training jobs at a thread percentage), each with p99 and its CI; on the first mix also MPS with the training at
   25 %, for the frontier, MPS with the training jobs at a lower client priority (CUDA_MPS_CLIENT_PRIORITY,
   driver 550+; `gpu.txt` records the driver) and MPS in MIG-shaped partitions (3g serving, 4g training).
3. The frontier per model for its SLO: training images/s against the inference p99, the settings within the SLO.

Issue 51 adds, per cell: the plain PyTorch peer (`peer_serve.py`, no kit code: its server at the same rate beside its
own training loops, under the same mode; `peer_beside.py`), the kit's p50/p99 against the peer's (target: within
10 %); each latency's parts (queueing, host, device time; `analysis.latency`); and the setting's capacity (the
same cell with the inference job closed-loop: `capacity_per_s`), a rate above it reported as `overloaded`. Each
launch of a setting (`--repeats`) and a peer cell run one right after the other, the one that goes first alternating
from pair to pair (`first` in `kit_vs_peer.csv`, from the two cells' start times; the summary gives the kit's over
the peer's with each order, and per setting over all its pairs); an experiment's capacity cells run after its pairs.

Writes under --out: `frontier.csv` (a row per run: served model, mix, setting, training images/s, p50/p99 with the
p99's CI, requests/s, share within the SLO, capacity, latency parts), `kit_vs_peer.csv` (a row per pair: a peer cell
beside each launch the kit makes, `--repeats` of them) and `kit_vs_peer_by_mode.csv` (`peer_beside.by_mode`),
`plain_vs_kit.csv` (and its pairs: the ratio kit / plain is taken per pair, the arm that goes first alternating,
and its mean given with its 95 % CI; the same pairs within the host's state, `plain_vs_kit_states.csv`,
`host_state.py`; split into device and host time, `plain_vs_kit_parts.csv`, `cost_parts.py`), `summary.md`, with
--confirm `confirm.md` and `confirm.csv`, the peer's JSON (`peer/`) and the runs themselves (`runs/`, as the kit
writes them, for `colloc-kit show` and the reference set `h200-inference`). The same command on the same --out
resumes it: cost pairs, kit cells and peer cells that ran as asked are read, not run again (a set longer than one
call of a lent machine runs over several, `lent_call.sh`).

    python benchmarks/inference/inference.py --out $OUT/inference         # the H100 set (about 15-20 minutes)
    python benchmarks/inference/inference.py --served resnet50 --mixes resnet50x1 --out $OUT/r50   # one model, mix
    python benchmarks/inference/inference.py --served resnet50 --rate resnet50=55.1 --out $OUT/r50  # an earlier rate
    python benchmarks/inference/inference.py --tiny --out /tmp/inference   # CPU: tiny models, 2-s windows (labelled so)
    python benchmarks/inference/inference.py --cost-only --cost-rounds 4   # only the kit's own cost
    python benchmarks/inference/inference.py --cost-only --cost-kit no-monitor   # the kit's arm without its monitor
    python benchmarks/inference/inference.py --served resnet50 --repeats 3 --no-capacity --out $OUT/r50  # 3 launches

The H200 runs ship as the reference set `h200-inference` (notebook 10, course sheet 5 and `advise --serve` read it),
from four folders of results/h200/, all 12-s windows (their commands and the facts given: its README,
`reference.readme`):

    bash benchmarks/inference/results/h200/export-set.sh    # p12-r50, p12-vit, rest-vit, rest-r50: 26 settings

(the six serve-* experiments: the cost rounds, capacity cells and confirmations stay in the runs.tgz).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.analysis.latency import PARTS
from colloc_kit.analysis.lone import DEFAULT_AUTOTUNE
from colloc_kit.pipeline.cells import Plan
from colloc_kit.pipeline.warm import between_windows
from colloc_kit.predict import serve_advise
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.stats import ci95
from colloc_kit.store.folder import ExperimentFolder
from cost_parts import p50_ms, parts_table, window_requests  # siblings: on sys.path when this file runs as a script
from host_state import FAST_FACTOR, state_table
from peer_beside import by_mode, by_order, kit_vs_peer, peer_ran, peer_setting

SERVED = {  # model -> (request: images, SLO); its rate comes from its measured service time (`offered_rate`)
    "resnet50": {"model": "resnet50", "batch_size": 4, "slo": "25ms"},
    "vit_b_16": {"model": "vit_b_16", "batch_size": 1, "slo": "25ms"},
}
LOAD = 0.3  # the rate offered to each served model: this share of what it serves alone, one request at a time
MIXES = {"resnet50x1": ("resnet50", 1), "resnet50x2": ("resnet50", 2), "vit_b_16x1": ("vit_b_16", 1)}
TRAIN_BATCH = {"resnet50": 64, "vit_b_16": 32, "smallcnn": 32}
TRAIN_SHARE = 50  # the training jobs' MPS thread percentage in the 4th setting
FRONTIER_SHARES = (25,)  # a further training share on the first mix, for the frontier
TINY = {"smallcnn": {"model": "smallcnn", "batch_size": 1, "slo": "40ms"}}
TINY_MIXES = {"smallcnnx1": ("smallcnn", 1)}


def settings(first_mix: bool, cuda: bool) -> list[ModeSpec]:
    """naive, MPS and MPS with the training at a share (the inference job, listed first, keeps 100 %); beside the
    first mix of `MIXES` also the frontier's shares, a client priority and partitions. On the CPU: naive only (MPS
    needs a GPU)."""
    if not cuda:
        return [ModeSpec("naive")]
    shares = (TRAIN_SHARE, *FRONTIER_SHARES) if first_mix else (TRAIN_SHARE,)
    first_only = [ModeSpec("mps", {"client_priority": [0, *[1] * 8]}),  # driver 550+
                  ModeSpec("mps", {"partitions": ["3g", "4g"]})] if first_mix else []  # MIG-shaped: 3/7 serves
    return [ModeSpec("naive"), ModeSpec("mps"), *first_only,
            *(ModeSpec("mps", {"thread_percentage": [100, *[share] * 8]}) for share in shares)]


def serve_job(served: dict, device: str, seconds: float, tiny: bool, max_batch: int = 4, **options) -> JobSpec:
    return JobSpec(**served, role="serve", device=device, seconds=seconds, warmup_steps=20, max_batch=max_batch,
                   max_delay_ms=1.0 if max_batch > 1 else 0.0, amp="off" if tiny else "bf16", interval_s=0.5,
                   image_size=32 if tiny else 224, **options)


def train_job(model: str, device: str, seconds: float, tiny: bool) -> JobSpec:
    return JobSpec(model=model, batch_size=TRAIN_BATCH[model], device=device, seconds=seconds, warmup_steps=10,
                   amp="off" if tiny else "bf16", workers=0 if tiny else 2, image_size=32 if tiny else 224,
                   interval_s=0.5)


def offered_rate(kit_p50_ms: float) -> float:
    """Requests/s offered to a served model: `LOAD` of its capacity alone (one request per p50), so that alone it
    meets its SLO with room and what sharing does to it shows (a fixed rate overloaded ResNet-50 even alone).

    >>> offered_rate(5.0)
    60.0
    """
    return round(LOAD * 1000 / kit_p50_ms, 1)


def experiments(args: argparse.Namespace, rates: dict[str, float]) -> list[tuple[str, str, ExperimentSpec]]:
    """(served model, mix, spec) for every experiment: per model and mix its shared settings, beside the first mix
    of `MIXES` also one exclusive run (serve + one training job, one after another: both lone baselines), each
    setting launched `--repeats` times; `rates`: requests/s per served model."""
    device = "cpu" if args.tiny else "cuda"
    mixes = {name: mix for name, mix in (TINY_MIXES if args.tiny else MIXES).items() if name in (args.mixes or [name])}
    served_models = {name: {**s, "rate_per_s": rates[name]} for name, s in served_here(args).items()}
    out = []
    for name, served in served_models.items():
        serve = serve_job(served, device, args.seconds, args.tiny)
        for mix, (model, copies) in mixes.items():
            train = train_job(model, device, args.seconds, args.tiny)
            first = mix == next(iter(TINY_MIXES if args.tiny else MIXES))
            modes = ([ModeSpec("exclusive")] if first else []) + settings(first, not args.tiny)
            out.append((name, mix, ExperimentSpec(jobs=[serve, train], modes=modes, copies=[copies],
                                                  repeats=args.repeats,
                                                  name=f"serve-{name}-beside-{mix}", time_limit_s=240)))
    return out


def capacity_spec(spec: ExperimentSpec) -> ExperimentSpec:
    """`spec` with its inference job closed-loop at twice `max_batch` clients (full batches, never idle): its
    requests/s in each setting is what the server can answer there, alone (exclusive) and beside training."""
    serve = spec.jobs[0]
    closed = replace(serve, rate_per_s=None, concurrency=2 * serve.max_batch)
    return replace(spec, jobs=[closed, *spec.jobs[1:]], name=spec.name.replace("serve-", "capacity-", 1))


def with_capacity(frontier: pd.DataFrame, capacity: pd.DataFrame) -> pd.DataFrame:
    """The frontier's rows with `capacity_per_s` (the same setting's closed-loop requests/s, the median over its
    launches with `--repeats`) and `overloaded`: offered more than that, so its latencies are a growing queue's, not
    the server's."""
    answered = capacity.groupby("mode_label")["requests_per_s"].median()
    table = frontier.assign(capacity_per_s=frontier["mode_label"].map(answered))
    return table.assign(overloaded=table["rate_per_s"] > table["capacity_per_s"])


def with_latency_parts(frontier: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """The frontier's rows with their inference job's latency parts (`analysis.latency`: each part's median and the
    p99 tail's make-up; NaN for runs that did not record them) and its answered share (of the requests that arrived
    in the window)."""
    columns = ["device_time", "answered_share", *(f"{name}_p50_ms" for name in PARTS),
               *(f"tail_{name}_ms" for name in PARTS)]
    serving = jobs[jobs["role"] == "serve"].reindex(columns=["run_id", *columns]).drop_duplicates("run_id")
    return frontier.merge(serving, on="run_id", how="left")


def kit_setting(spec: ExperimentSpec, mode: ModeSpec, runs: Path) -> pd.DataFrame:
    """The kit's cell of `spec` under `mode`: `run_spec` of the spec with that mode only (the cell's id names its
    mode, copies, repeat and jobs, not the spec's other modes: a folder resumed reads the cell), its frontier row
    with the latency parts and `started_at` (Unix time, the run's manifest)."""
    results = colloc_kit.run_spec(replace(spec, modes=[mode]), out=runs, progress=False)
    started = results.runs.set_index("run_id")["started_at"]
    rows = with_latency_parts(serve_advise.run_rows(results), results.jobs)
    return rows.assign(started_at=rows["run_id"].map(started))


def paired_settings(spec: ExperimentSpec, runs: Path, peer: Path | None) -> tuple[pd.DataFrame, list[dict]]:
    """Each launch (`--repeats`) of each setting of `spec` by the kit (`kit_setting`) and by the plain PyTorch peer
    (`peer_setting`, into `peer`; None: no peer) one right after the other, the one that goes first alternating from
    pair to pair (the kit in a setting's first launch of the 1st, 3rd, ... setting), so that neither always meets
    the GPU's state second; the kit's frontier rows and the peer's rows. A peer cell runs only beside a launch the
    kit makes now: beside a launch read from an earlier call, the peer's cell is read if it ran then, else left out
    (a peer is held only against the kit's launch it ran beside)."""
    kit, peer_rows = [], []
    folder = ExperimentFolder.of(runs, spec.name)
    for index, mode in enumerate(spec.modes):
        for launch in range(spec.repeats):
            upto = replace(spec, modes=[mode], repeats=launch + 1)  # its earlier launches are read, not run again
            now = any(cell.repeat == launch for cell in Plan.of(upto, folder).todo)
            paired = peer is not None and (now or peer_ran(spec, index, peer, launch) is not None)
            for arm in ("kit", "peer") if (index + launch) % 2 == 0 else ("peer", "kit"):
                if arm == "kit":
                    rows = kit_setting(upto, mode, runs)
                    kit.append(rows[rows["repeat"] == launch])
                elif paired:
                    peer_rows.append(peer_setting(spec, index, peer, launch))
    return pd.concat(kit, ignore_index=True), peer_rows


def served_here(args: argparse.Namespace) -> dict[str, dict]:
    """The served models this invocation measures: the tiny one, or those of `--served` (all by default)."""
    return TINY if args.tiny else {name: s for name, s in SERVED.items() if name in (args.served or [name])}


# the plain loop's process: `ready` once built, then for each line in (a window's seconds) a line out, `requests
# [[start, answered, device ms], ...]` (the device time as the kit's server takes it: CUDA events from the copy in to
# the classes; on the CPU the request's wall time), cuDNN autotuning as the kit's server has it
# (`JobSpec.cudnn_autotune`; sessions 22-24's cost rounds ran the plain loop without it, the kit's server with it)
PLAIN_LOOP = """
import json, sys, time, torch
from colloc_kit.worker.models import build_model
cuda = {cuda}
torch.backends.cudnn.benchmark = {autotune}
device = torch.device('cuda' if cuda else 'cpu')
model = build_model({model!r}, 1000, {side}).to(device).eval()
host = torch.rand({batch_size}, 3, {side}, {side}, pin_memory=cuda)
began, ended = (torch.cuda.Event(enable_timing=True) for _ in range(2)) if cuda else (None, None)
def served():
    t0 = time.perf_counter()
    if cuda:
        began.record()
    classes = model(host.to(device, non_blocking=True)).argmax(1)
    if cuda:
        ended.record()
    classes.cpu()
    done = time.perf_counter()
    return [t0, done, began.elapsed_time(ended) if cuda else 1000 * (done - t0)]
print('ready', flush=True)
with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
    for line in sys.stdin:
        for i in range(20):
            served()
        requests = []
        end = time.perf_counter() + float(line)
        while time.perf_counter() < end:
            requests.append(served())
        print('requests', json.dumps(requests), flush=True)
"""


class PlainLoop:
    """A plain PyTorch loop serving the kit's requests one at a time, in a process of its own (CUDA stays out of the
    benchmark's process, as it stays out of the kit's), started once per served model and kept for all its cost
    windows: each `window` costs its seconds, not a Python start and a model build.

        with PlainLoop(TINY["smallcnn"], tiny=True) as plain:
            requests = plain.window(3.0)   # [start, answered (seconds), device ms] of each after 20 warm ones
    """

    def __init__(self, served: dict, tiny: bool) -> None:
        code = PLAIN_LOOP.format(cuda=not tiny, model=served["model"], side=32 if tiny else 224,
                                 batch_size=served["batch_size"], autotune=not tiny and DEFAULT_AUTOTUNE == "study")
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self._said("ready")  # built before any arm runs: its start never overlaps the kit's

    def window(self, seconds: float) -> list[list[float]]:
        """[start, answered (seconds), device time (ms)] of each request served for `seconds`, after 20 warm ones."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{seconds}\n")
        self.process.stdin.flush()
        return json.loads(self._said("requests "))

    def _said(self, word: str) -> str:
        """The rest of the process's next line that starts with `word` (other lines, a library's notices, passed
        over)."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(word):
                return line.removeprefix(word)
        raise RuntimeError(f"the plain loop ended (exit code {self.process.wait()})")

    def __enter__(self) -> PlainLoop:
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # its loop ends at EOF
        self.process.wait(timeout=60)


# the kit's arm of the cost rounds as users run it, or with one of its parts taken away, to find where a difference
# in the p50 comes from: its GPU and host monitor (`ExperimentSpec.monitor`), its placement on a block of cores
COST_KIT = {"as-run": {}, "no-monitor": {"monitor": False}, "unpinned": {"placement": "unpinned"}}


def paired_windows(served: dict, args: argparse.Namespace, runs: Path, plain: PlainLoop) -> list[dict]:
    """`--cost-rounds` pairs of windows of `--cost-seconds`: the plain loop's (`plain`, one process) and the kit's
    inference job alone (closed loop, one client: each latency one request's service) as one launch measured window
    after window (warm repeats; the server idles, held, between them: `worker.serve`), the plain loop's windows run
    between the kit's (`warm.between_windows`); the arm that goes first alternating, plain first in the 1st, 3rd, ...
    pair (plain, kit, kit, plain, plain, kit, ...), so that neither always meets the host's state first and a pair's
    two windows are seconds apart. Per pair: `first` and each arm's requests ([arrival, answered] seconds, device
    ms; the kit's [] where its window failed)."""
    seconds, pairs = args.cost_seconds, args.cost_rounds
    job = serve_job({**served, "concurrency": 1}, "cpu" if args.tiny else "cuda", seconds, args.tiny, max_batch=1)
    spec = ExperimentSpec(jobs=[job], modes=[ModeSpec("naive")], repeats=pairs, warm_repeats=True,
                          name=f"cost-{served['model']}", **COST_KIT[args.cost_kit])
    plains: list[list[list[float]]] = []

    def plain_around(window: int) -> None:  # before the kit's window `window`: the plain ones due by then
        if window > 0 and window % 2 == 0:  # the last pair's, kit first
            plains.append(plain.window(seconds))
        if window % 2 == 0:  # this pair's, plain first
            plains.append(plain.window(seconds))

    plain_around(0)
    with between_windows(plain_around):
        results = colloc_kit.run_spec(spec, out=runs, progress=False, again=True)
    if pairs % 2 == 0:
        plains.append(plain.window(seconds))  # the last pair's, kit first
    kit = results.runs.sort_values("started_at").tail(pairs)
    return [{"first": "plain" if pair % 2 == 0 else "kit", "plain": plains[pair],
             "kit": window_requests(Path(run.run_dir)) if run.status == "complete" else []}
            for pair, run in enumerate(kit.itertuples())]


def kit_cost(args: argparse.Namespace, out: Path, runs: Path) -> pd.DataFrame:
    """The kit's own cost per served model: its pairs of windows (`paired_windows`: the plain loop and the kit's job
    alone, each one process for all its windows, one window right after the other: a host that slows for a while
    slows both windows of a pair alike); per model the medians of the pairs' p50s and the mean of the pairs' ratios
    kit / plain with its 95 % CI. `plain_vs_kit_rounds.csv` (a row per pair) and the pairs' requests
    (`plain_vs_kit_requests.json`) are written after every model, and a folder resumed reads a model whose pairs it
    holds, run with the same window; the same pairs compared within the host's state (`host_state`) in
    `plain_vs_kit_states.csv`, and split into device and host time (`cost_parts`) in `plain_vs_kit_parts.csv`."""
    done = out / "plain_vs_kit_requests.json"
    kept = [r for r in (json.loads(done.read_text()) if done.exists() else ())
            if r.get("seconds") == args.cost_seconds]  # a folder resumed: pairs that ran as asked are read
    requests = [r for r in kept if r["model"] not in served_here(args)]  # other models' pairs, kept in the file
    for name, served in served_here(args).items():
        mine = [r for r in kept if r["model"] == name]
        if len(mine) < args.cost_rounds:
            with PlainLoop(served, args.tiny) as plain:
                pairs = paired_windows(served, args, runs, plain)
            mine = [{"model": name, "round": index, "seconds": args.cost_seconds, **pair,
                     "row": {"model": name, "round": index, "first": pair["first"], "plain_p50_ms":
                             p50_ms(pair["plain"]), "kit_p50_ms": p50_ms(pair["kit"])}}
                    for index, pair in enumerate(pairs)]
        requests += mine
        done.write_text(json.dumps(requests))
        pd.DataFrame([r["row"] for r in requests if r["model"] in served_here(args)]).to_csv(
            out / "plain_vs_kit_rounds.csv", index=False)
    mine = [r for r in requests if r["model"] in served_here(args)]
    state_table(mine).to_csv(out / "plain_vs_kit_states.csv", index=False)
    parts_table(mine).to_csv(out / "plain_vs_kit_parts.csv", index=False)
    table = pd.DataFrame([r["row"] for r in mine]).assign(ratio=lambda d: d["kit_p50_ms"] / d["plain_p50_ms"])
    rows = []
    for name, part in table.groupby("model", sort=False):
        ratio, half = ci95(part["ratio"].dropna())
        rows.append({"model": name, "rounds": len(part), "plain_p50_ms": part["plain_p50_ms"].median(),
                     "kit_p50_ms": part["kit_p50_ms"].median(), "kit_over_plain": ratio - 1, "ci95": half})
    cost = pd.DataFrame(rows)
    cost.to_csv(out / "plain_vs_kit.csv", index=False)
    return cost


def confirm(args: argparse.Namespace, out: Path, runs: Path, chosen: list, table: pd.DataFrame) -> None:
    """`advise --confirm`'s target: the setting chosen for the first model and mix, repeated `--confirm` times; what
    the repeats said (`serve_advise.Confirmation`: within the SLO, training kept, p99 inside the range the
    advice gave: with `--repeats` 2 or more, the range of one more launch)."""
    served, _, spec = chosen[0]
    rows = table[table["experiment"] == spec.name]
    slo, mix = f"{rows['slo_ms'].iloc[0]:g}ms", rows["mix"].iloc[0]
    advice = serve_advise.choose(serve_advise.by_setting(rows), served, float(rows["rate_per_s"].iloc[0]), slo, mix)
    if advice.row is None:
        (out / "confirm.md").write_text(f"{served} beside {mix}: no shared setting met {slo}; nothing to confirm\n")
        return
    repeated = serve_advise.run_rows(colloc_kit.run_spec(serve_advise.confirm_spec(spec, advice, args.confirm),
                                                         out=runs, progress=False))
    confirmed = serve_advise.confirmation(advice, repeated)
    (out / "confirm.md").write_text(
        f"{served} at {rows['rate_per_s'].iloc[0]:g}/s beside {mix}, SLO {slo}: chose {advice.row['mode_label']}; "
        f"confirmed: {confirmed.line(advice.row['mode_label'])}\n" + repeated.to_string(index=False) + "\n")
    repeated.to_csv(out / "confirm.csv", index=False)


def given_rates(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, float]:
    """`--rate`'s requests/s per served model: none, or one for each model this call serves (else exit 2)."""
    rates = {}
    for given in args.rate:
        model, _, rate = given.partition("=")
        try:
            rates[model] = float(rate)
        except ValueError:
            parser.error(f"--rate {given}: give MODEL=REQUESTS_PER_S, e.g. --rate resnet50=61.2")
    missing = sorted(set(served_here(args)) - set(rates))
    if rates and (missing or args.cost_only):
        parser.error(f"--rate: give one for every served model ({', '.join(missing)} missing), or none to measure "
                     "the kit's cost first" if missing else "--rate with --cost-only measures nothing: leave one out")
    return rates


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/inference/results/h100")
    p.add_argument("--seconds", type=float, default=None, help="each job's window (default 4 on a GPU, 2 --tiny)")
    p.add_argument("--tiny", action="store_true", help="CPU: smallcnn, naive only (not the issue's figures)")
    p.add_argument("--cost-rounds", type=int, default=3,
                   help="pairs of windows, the plain loop's and the kit's (the first alternating), per served model")
    p.add_argument("--cost-seconds", type=float, default=None,
                   help="each cost round's window per arm (default --seconds; 3 s hold about 600 requests of 5 ms)")
    p.add_argument("--cost-only", action="store_true", help="only the kit's own cost (plain_vs_kit.csv)")
    p.add_argument("--cost-kit", choices=sorted(COST_KIT), default="as-run",
                   help="the kit's arm of the cost rounds: as users run it, without its monitor, or unpinned")
    p.add_argument("--repeats", type=int, default=1,
                   help="launches of each setting (a folder resumed runs only those it lacks): the p99 from run to run")
    p.add_argument("--confirm", type=int, default=0, help="repeat the setting chosen for the first model and mix")
    p.add_argument("--served", nargs="+", choices=sorted(SERVED), help="only these served models (a GPU run)")
    p.add_argument("--mixes", nargs="+", choices=sorted(MIXES),
                   help="only these training mixes (a GPU run; the first gets the exclusive run and extra settings)")
    p.add_argument("--no-capacity", action="store_true", help="leave out each setting's closed-loop capacity run")
    p.add_argument("--no-peer", action="store_true", help="leave out the plain PyTorch peer's cells")
    p.add_argument("--rate", nargs="+", default=[], metavar="MODEL=PER_S",
                   help="offer these requests/s (an earlier call's, from its summary) instead of measuring the kit's "
                        "cost first; one per served model")
    p.add_argument("--budget-s", type=float, default=420.0, help="skip --confirm past this many seconds")
    args = p.parse_args(argv)
    given = given_rates(p, args)
    args.seconds = args.seconds or (2.0 if args.tiny else 4.0)
    args.cost_seconds = args.cost_seconds or args.seconds
    out = Path(args.out)
    runs = out / "runs"
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    cost = pd.DataFrame() if given else kit_cost(args, out, runs)
    print(cost.to_string(index=False) if len(cost) else f"rates given: {given}", flush=True)
    if args.cost_only:
        return 0
    rates = given or {row.model: offered_rate(row.kit_p50_ms) for row in cost.itertuples()}
    parts, peer_rows = [], []
    for _, _, spec in experiments(args, rates):
        print(f"[{time.monotonic() - started:5.0f} s] {spec.name}: {[m.label for m in spec.modes]}", flush=True)
        kit, peer = paired_settings(spec, runs, None if args.no_peer else out / "peer")
        parts.append(kit)
        peer_rows += peer
        if not args.no_capacity:
            closed = colloc_kit.run_spec(capacity_spec(spec), out=runs, progress=False)
            parts[-1] = with_capacity(parts[-1], serve_advise.run_rows(closed))
        table = pd.concat(parts, ignore_index=True)  # written after every experiment: a run cut short keeps its part
        table.to_csv(out / "frontier.csv", index=False)
        against = kit_vs_peer(table, pd.DataFrame(peer_rows)) if peer_rows else None
        if against is not None:
            against.to_csv(out / "kit_vs_peer.csv", index=False)
            by_mode(against).to_csv(out / "kit_vs_peer_by_mode.csv", index=False)
        write_summary(out, cost, table, against, args, time.monotonic() - started)
    if args.confirm and time.monotonic() - started < args.budget_s:
        confirm(args, out, runs, experiments(args, rates)[:1], table)
    print(f"done in {time.monotonic() - started:.0f} s; {out}/summary.md")
    return 0


def state_lines(out: Path) -> list[str]:
    """The summary's lines on the cost within the host's state (`host_state`), if the pairs were run here."""
    states = out / "plain_vs_kit_states.csv"
    if not states.exists():
        return []
    table = pd.read_csv(states)
    return [f"The same pairs within the host's state (`host_state.py`: a 0.5-s slice is fast when its p50 is at "
            f"most {FAST_FACTOR:g} x the fastest slices'; `*_share`: the state's share of each arm's slices):", "",
            "```", table.drop(columns="fast_below_ms").to_string(index=False, float_format="%.3f"), "```", ""]


def write_summary(out: Path, cost: pd.DataFrame, table: pd.DataFrame, against: pd.DataFrame | None,
                  args: argparse.Namespace, seconds: float) -> None:
    machine = colloc_kit.machine.describe()
    gpu = next(iter(machine.get("gpus") or []), {}).get("name", "no GPU (CPU run)")
    lines = [f"# Inference beside training ({'TINY CPU models, not the issue figures' if args.tiny else gpu})", "",
             f"Command: `python benchmarks/inference/inference.py {' '.join(sys.argv[1:])}`; "
             f"host {machine['host']['hostname']};"
             f" {seconds:.0f} s.", "", "## The kit's own cost (inference job alone vs a plain PyTorch loop, p50)", "",
             *(["```", cost.to_string(index=False), "```", ""] if len(cost) else
               ["Not measured in this call: the rates offered were given (`--rate`, an earlier call's).", ""]),
             *state_lines(out), "## p99 per model, mix and setting", "",
             "```", table.reindex(columns=["served", "mix", "mode_label", "latency_p50_ms", "latency_p99_ms",
                                          "latency_p99_ms_lo", "latency_p99_ms_hi", "rate_per_s", "requests_per_s",
                                          "capacity_per_s", "overloaded", "slo_share", "train_images_per_s",
                                          "within_slo"])
             .to_string(index=False, float_format="%.2f"), "```", ""]
    if against is not None:
        timed_by = next(iter(against["peer_device_time"].dropna()), "none recorded")
        order = by_order(against)
        lines += ["## The kit against the plain PyTorch peer (peer_serve.py), same cells and rates", "", "```",
                  against[["served", "mix", "mode_label", "latency_p50_ms", "peer_p50_ms", "p50_kit_over_peer",
                           "latency_p99_ms", "peer_p99_ms", "p99_kit_over_peer", "within_10pct", "answered_short",
                           "first", "peer_error"]]
                  .to_string(index=False, float_format="%.3f"), "```", "",
                  "The kit's over the peer's with each order (`first`: which of a setting's two cells ran first, "
                  "alternating from setting to setting; the mean over the settings compared, with its 95 % CI): a "
                  "difference that follows the order is the GPU's state from one cell to the next, not the program.",
                  "", *(["```", order.to_string(index=False, float_format="%.3f"), "```"] if len(order) else
                        ["None compared: every setting answered short, or ran before the order was recorded."]), "",
                  "Per setting, over its pairs (every served model, mix and launch; `by_mode`: the geometric mean of "
                  "the pairs' kit / peer, minus 1, with its 95 % CI; `agrees`: the p50's and the p99's CI inside "
                  "10 %):", "", "```", by_mode(against).to_string(index=False, float_format="%.3f"), "```", "",
                  "Each latency's parts, kit and peer (p50 of queueing, host and device time; `tail_`: their means "
                  f"over the requests at or above the kit's p99; device time: {timed_by}):",
                  "", "```", against[["served", "mix", "mode_label", *(f"{who}{name}_p50_ms" for name in PARTS
                                                                       for who in ("", "peer_")),
                                       *(f"tail_{name}_ms" for name in PARTS)]]
                  .to_string(index=False, float_format="%.3f"), "```", ""]
    for served, rows in table.groupby("served"):
        best = rows[rows["within_slo"] & rows["shared"]].sort_values("train_images_per_s")
        pick = best.iloc[-1] if len(best) else None
        lines.append(f"- {served} (SLO {rows['slo_ms'].iloc[0]:g} ms): " + (
            f"most training within the SLO: {pick['mode_label']} beside {pick['mix']} "
            f"({pick['train_images_per_s']:.0f} images/s, p99 {pick['latency_p99_ms']:.1f} ms)" if pick is not None
            else "no shared setting met the SLO"))
    (out / "summary.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())

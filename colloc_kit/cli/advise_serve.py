"""`colloc-kit advise --serve`: the sharing setting that keeps an inference job's p99 within its SLO with the most
training beside it, from measured runs (`predict.serve_advise`), optionally confirmed on this GPU.

    colloc-kit advise --serve resnet50 --rate 38.5 --slo 25ms --beside "resnet50 x2"           # the shipped H200 set
    colloc-kit advise --serve resnet50 --rate 38.5 --slo 25ms --beside "resnet50 x2" --runs runs/serving
    colloc-kit advise --serve smallcnn --rate 20 --slo 200ms --beside "smallcnn x1" --device cpu --confirm 2

Measured runs come from --runs (a folder) or the shipped reference set `h200-inference` (--reference to name
another; it holds ResNet-50 at 38.5 and ViT-B/16 at 42.6 requests/s, each beside resnet50 x1, resnet50 x2 and
vit_b_16 x1, measured on an H200). With no run of the question, `--confirm K` first measures every setting
(`serve_advise.SETTINGS`, one run each), then repeats the chosen one K times; the answer says whether it held the
SLO in each repeat and what share of the best training within the SLO it kept. Bad input exits 2 before anything runs.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import pandas as pd

from colloc_kit import reference
from colloc_kit.analysis.results import Results, load
from colloc_kit.errors import BadInput
from colloc_kit.paths import check_folder
from colloc_kit.pipeline.api import run_spec
from colloc_kit.predict import serve_advise
from colloc_kit.spec import ExperimentSpec, JobSpec

__all__ = ["REFERENCE", "add_arguments", "cmd_advise_serve"]

REFERENCE = "h200-inference"  # the shipped runs of benchmarks/inference/inference.py


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`advise`'s serving flags."""
    g = p.add_argument_group("serving (an inference job beside training)")
    g.add_argument("--serve", metavar="MODEL", help="the model served (e.g. resnet50, vit_b_16)")
    g.add_argument("--rate", type=float, help="--serve: requests per second (open loop)")
    g.add_argument("--slo", help="--serve: the p99 target with units, e.g. 25ms")
    g.add_argument("--beside", help="--serve: the training beside it, e.g. 'resnet50 x2'")
    g.add_argument("--request-size", type=int, default=None, help="--serve --confirm: images per request (default: "
                                                                  "the measured runs', else 1)")
    g.add_argument("--device", default="cuda", help="--serve --confirm: cuda | cpu")


def cmd_advise_serve(args: argparse.Namespace) -> int:
    """Check the question, answer it from measured runs, confirm where asked; 0, or 1 where a confirmation failed."""
    missing = [flag for flag, value in (("--rate", args.rate), ("--slo", args.slo), ("--beside", args.beside))
               if value is None]
    if missing:
        raise BadInput(f"--serve needs {', '.join(missing)}, e.g. --serve resnet50 --rate 38.5 --slo 25ms "
                       "--beside 'resnet50 x2'")
    if not (math.isfinite(args.rate) and args.rate > 0):
        raise BadInput(f"--rate must be above zero requests per second, got {args.rate:g}")
    probe = JobSpec(model=args.serve, role="serve", rate_per_s=args.rate, slo=args.slo, device=args.device)
    if args.confirm:
        check_folder(args.out, "results folder (--out)", write=True)
    table = serve_advise.frontier(_measured(args))
    try:
        advice = serve_advise.choose(table, args.serve, args.rate, args.slo, args.beside)
    except BadInput:
        if not args.confirm:
            raise
        advice = None
    if advice is not None:
        _print(advice)
    if not args.confirm:
        return 0
    spec = _sweep(args, probe)
    if advice is None:  # measure the question first, then choose from what was measured
        advice = serve_advise.choose(serve_advise.frontier(run_spec(spec, out=args.out)), args.serve, args.rate,
                                     args.slo, args.beside)
        _print(advice)
    confirmed = run_spec(serve_advise.confirm_spec(spec, advice, args.confirm), out=args.out)
    return _report_confirmed(serve_advise.run_rows(confirmed), advice)


def _measured(args: argparse.Namespace) -> Results:
    if args.runs is not None and args.reference is not None:
        raise BadInput("give --runs or --reference, not both")
    if args.runs is not None:
        return load(check_folder(args.runs, "runs folder (--runs)", exists=True))
    name = args.reference or REFERENCE
    if name not in reference.available():
        if args.confirm:
            return Results(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
        raise BadInput(f"no shipped reference set {name!r} here (no serving data shipped): give --runs "
                       "with your runs, or --confirm K to measure on this GPU")
    return reference.load(name)


def _sweep(args: argparse.Namespace, probe: JobSpec) -> ExperimentSpec:
    """The experiment that measures the question here: the inference job beside the training, every setting."""
    cpu = args.device == "cpu"
    size: dict[str, Any] = {"image_size": 32, "workers": 0} if cpu else {}
    serve = probe.with_(batch_size=args.request_size or 1, seconds=args.seconds or 5.0, warmup_steps=10,
                        max_batch=4, max_delay_ms=1.0, interval_s=0.5, **({"image_size": 32} if cpu else {}))
    mix = serve_advise.normal_mix(args.beside)
    training = [(JobSpec(model=part.rsplit(" x", 1)[0], batch_size=32, device=args.device,
                         seconds=args.seconds or 5.0, warmup_steps=5, **size), int(part.rsplit(" x", 1)[1]))
                for part in mix.split(" + ")]
    modes = [m for m in serve_advise.SETTINGS if m.name == "naive"] if cpu else None
    return serve_advise.sweep_spec(serve, training, f"serve-{args.serve}-beside-{mix.replace(' ', '')}", modes)


def _print(advice: serve_advise.Advice) -> None:
    shown = advice.candidates[["mode_label", "launches", "train_images_per_s", "latency_p99_ms", "latency_p99_ms_lo",
                               "latency_p99_ms_hi", "next_p99_ms_lo", "next_p99_ms_hi", "within_slo"]]
    with pd.option_context("display.width", 200, "display.float_format", "{:,.1f}".format):
        print(f"settings measured ({advice.source}):\n{shown.to_string(index=False)}\n\nchosen: {advice.text}")


def _report_confirmed(table: pd.DataFrame, advice: serve_advise.Advice) -> int:
    """How often the confirmed repeats met the SLO, the training they kept against the best measured within it, and
    how often their p99 fell inside the range the advice gave (`serve_advise.Confirmation`); 1 where the first two
    missed."""
    assert advice.row is not None  # serve_advise.confirm_spec confirms only a chosen setting
    confirmed = serve_advise.confirmation(advice, table)
    print(f"\nconfirmed: {confirmed.line(advice.row['mode_label'])}")
    return 0 if confirmed.held else 1

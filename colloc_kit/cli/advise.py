"""`colloc-kit advise`: rank sharing configurations of a mix by predicted gain, without a GPU (`predict.advise`).

    colloc-kit advise seed-37                          # experiment 37's 14 mixes from the shipped H100 lone runs
    colloc-kit advise "resnet152 + resnet50" --experiment seed-37 --top 5 [--explain]
    colloc-kit advise resnet18 --reference h100-matrix --copies 2,4,7 --pairs pairs.csv
    colloc-kit advise spec.yaml --runs runs/lone --confirm 3 --out runs --seconds 15
    colloc-kit advise --serve resnet50 --rate 38.5 --slo 25ms --beside "resnet50 x2"   # an inference job's safe share

A mix is workloads joined by '+' ('resnet152 + 2 x resnet26'; a name is a workload label or a unique part of one),
a YAML spec (its jobs), or seed-37. Lone runs come from a shipped reference set (default h100-80gb) or a folder of
runs (--runs). Bad input (an unknown workload, a mix with no lone run) exits 2 before anything runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from colloc_kit import reference
from colloc_kit.analysis.results import load
from colloc_kit.cli import advise_serve
from colloc_kit.cli.skipped import name_skipped
from colloc_kit.analysis.summaries import workload_label
from colloc_kit.errors import BadInput
from colloc_kit.paths import check_folder
from colloc_kit.predict import advise as adv
from colloc_kit.predict import check as predict_check
from colloc_kit.predict.model import MODES, LoneProfile, Target
from colloc_kit.spec import MAX_JOBS_PER_RUN, ExperimentSpec
from colloc_kit.spec.yaml_files import read_yaml

__all__ = ["SHOWN", "add_subcommand", "cmd_advise"]

SHOWN = ["rank", "config", "predicted_gain", "gain_low", "gain_high", "binding", "predicted_images_per_s"]


def add_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `advise` to the top-level subparsers."""
    p = subparsers.add_parser("advise", help="rank sharing configurations of a mix by predicted gain (no GPU needed)")
    p.add_argument("mix", nargs="*", help="'A + 2 x B', a YAML spec, or seed-37 (experiment 37's mixes)")
    p.add_argument("--reference", help="shipped lone runs to predict from (default h100-80gb)")
    p.add_argument("--runs", help="a folder of runs holding the lone runs (mode exclusive, copies 1) instead")
    p.add_argument("--experiment", help="take the lone runs of this experiment only")
    p.add_argument("--copies", type=lambda s: [int(x) for x in s.split(",")], default=list(adv.DEFAULT_COPIES),
                   help="copy counts for a single workload (default 2,3,4,7)")
    p.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES), help=f"of {','.join(MODES)}")
    p.add_argument("--top", type=int, default=5, help="configurations shown per mix (default 5)")
    p.add_argument("--explain", action="store_true", help="print the arithmetic of the best configuration")
    p.add_argument("--pairs", help="write the pairwise co-location table (CSV) here")
    p.add_argument("--json", action="store_true", help="print the ranking as JSON records")
    p.add_argument("--confirm", type=int, metavar="K", help="run the top K of each mix on this GPU, measured beside "
                                                            "predicted")
    p.add_argument("--out", default="runs", help="results folder of --confirm (default: runs)")
    p.add_argument("--seconds", type=float, help="--confirm: each job's measured seconds (default 100 steps)")
    advise_serve.add_arguments(p)
    p.set_defaults(handler=cmd_advise)
    return p


def cmd_advise(args: argparse.Namespace) -> int:
    """`colloc-kit advise`: check everything first, then rank (and confirm)."""
    if args.serve:  # an inference job beside training: cli/advise_serve.py
        return advise_serve.cmd_advise_serve(args)
    if not args.mix:
        raise BadInput("advise needs a mix ('A + 2 x B', a spec, seed-37), or --serve MODEL --rate R --slo S "
                       "--beside M")
    if args.top < 1 or (args.confirm is not None and args.confirm < 1):
        raise BadInput("--top and --confirm take a count of 1 or more, e.g. --top 5 --confirm 3")
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown:
        raise BadInput(f"--modes takes {', '.join(MODES)} (got {', '.join(unknown)}); e.g. --modes naive,mps")
    if any(not 1 <= c <= MAX_JOBS_PER_RUN for c in args.copies):
        raise BadInput(f"--copies takes counts from 1 to {MAX_JOBS_PER_RUN} (as `run` does; got "
                       f"{','.join(map(str, args.copies))}): lower --copies")
    for flag, value in (("--reference", args.reference), ("--experiment", args.experiment), ("--pairs", args.pairs)):
        if value is not None and not value.strip():
            raise BadInput(f"{flag} is empty; give a name (or leave the flag out)")
    if args.seconds is not None and not (math.isfinite(args.seconds) and args.seconds > 0):
        raise BadInput(f"--seconds must be a positive number of seconds, got {args.seconds}; e.g. --seconds 15")
    if args.pairs:
        _check_pairs_file(args.pairs)
    if args.confirm:
        check_folder(args.out, "results folder (--out)", write=True)  # checked before the ranking, not after
    lone, target, source = _lone(args)
    mixes = _mixes(args.mix, lone)
    if args.confirm:
        adv.check_confirmable(mixes, lone)  # the GPU and the data the reruns need, before the ranking
    bands = predict_check.error_bands()
    tables = [adv.advise(jobs, lone, target, copies=args.copies, modes=args.modes, bands=bands) for jobs in mixes]
    if args.pairs:
        validated = predict_check.validate(predict_check.reference_cells())
        adv.pairs(lone, target, measured=validated).to_csv(args.pairs, index=False)
    if args.json:
        print(json.dumps([r for t in tables for r in t.head(args.top)[["mix", *SHOWN, "fits"]]
                          .to_dict("records")], indent=1, default=str))
    else:
        _print(tables, args, source, bands)
    if args.confirm:
        budget = {"seconds": args.seconds} if args.seconds else None
        for table in tables:
            done = adv.confirm(table, lone, args.confirm, args.out, budget=budget)
            with pd.option_context("display.width", 200, "display.float_format", "{:,.2f}".format):
                print("\nconfirmed on this GPU (measured beside predicted):\n"
                      + done.drop(columns="run_ids").to_string(index=False))
    return 0


def _check_pairs_file(path: str) -> None:
    """--pairs: a file that can be written, in a folder that exists (checked before the ranking); BadInput naming
    the flag."""
    file = Path(path)
    if file.is_dir():
        raise BadInput(f"--pairs {path} is a folder; give a CSV file to write, e.g. --pairs pairs.csv")
    check_folder(file.parent, f"the folder of --pairs {path}:", exists=True, write=True)
    if file.exists() and not os.access(file, os.W_OK):
        raise BadInput(f"--pairs {path} cannot be written (permission denied); give another file")


def _lone(args: argparse.Namespace) -> tuple[dict[str, LoneProfile], Target, str]:

    if args.runs is not None and args.reference is not None:
        raise BadInput("give --runs or --reference, not both")
    skipped = 0
    if args.runs is not None:
        results = load(check_folder(args.runs, "lone runs folder (--runs)", exists=True))
        skipped = name_skipped(results)  # a broken run beside the good ones: named, as `show` names it
        target, where = adv.local_target(results), args.runs
    else:
        name = reference.DEFAULT if args.reference is None else args.reference
        results, where = reference.load(name), f"the shipped set {name}"
        target = predict_check.target_of(results)  # its GPU (an H200 set: an H200's memory and profiles)
    experiment = args.experiment or ("seed-37" if args.mix == ["seed-37"] and args.runs is None else None)
    lone = predict_check.profiles(results, experiment)
    of = f", experiment {experiment}" if experiment else ""
    if not lone and skipped and results.runs.empty:
        raise BadInput(f"no lone runs in {where}: every run there is broken (named above); run each workload alone "
                       "again (mode exclusive), or give --runs a folder of good ones")
    if not lone:
        raise BadInput(f"no lone runs (mode exclusive, one job, complete) in {where}{of}: run each workload alone "
                       "first")
    return lone, target, f"lone runs in {where}{of}"


def _mixes(words: list[str], lone: Mapping[str, LoneProfile]) -> list[tuple[str, ...]]:
    if words == ["seed-37"]:
        return adv.seed_mixes(lone)
    if len(words) == 1 and words[0].endswith((".yaml", ".yml")):
        return [_spec_jobs(words[0], lone)]
    return [adv.parse_mix(w, lone) for w in words]


def _spec_jobs(path: str, lone: Mapping[str, LoneProfile]) -> tuple[str, ...]:

    spec = ExperimentSpec.from_mapping(read_yaml(path))
    labels = [workload_label({**job.__dict__}) for job in spec.jobs]
    missing = sorted({w for w in labels if w not in lone})
    if missing:
        raise BadInput(f"{path}: no lone run of {', '.join(missing)}; lone runs there: {'; '.join(sorted(lone))}. "
                       "Run each job alone first (mode exclusive, copies 1)")
    return tuple(labels)


def _print(tables: list[pd.DataFrame], args: argparse.Namespace, source: str,
           bands: Mapping[str, Mapping[str, float]]) -> None:
    band = "; ".join(f"{m} ± {b['p90']:.0%}" for m, b in sorted(bands.items()))
    print(f"Predicted from {source}; error band: the 90th percentile of each mode's held-out error ({band}).")
    with pd.option_context("display.width", 200, "display.max_colwidth", 60,
                           "display.float_format", "{:,.2f}".format):
        for table in tables:
            if table["mix"].nunique() > 1:  # one workload at several copy counts: each row says its own
                counts = ",".join(map(str, sorted(table["n_jobs"].unique())))
                print(f"\n{table['_config'].iloc[0].jobs[0]}, at {counts} copies (copies: of each row)")
                shown = table.head(args.top).rename(columns={"n_jobs": "copies"})[[SHOWN[0], "copies", *SHOWN[1:]]]
            else:
                print(f"\n{table['mix'].iloc[0]}")
                shown = table.head(args.top)[SHOWN]
            print(shown.to_string(index=False))
            _print_host(table)
            left = table[~table["fits"]]
            if len(left):
                print(f"  ({len(left)} configurations do not fit in memory, e.g. {left['config'].iloc[0]})")
            if args.explain:
                print(table["why"].iloc[0])


def _print_host(table: pd.DataFrame) -> None:
    """Where the workload is input-bound alone: one job with the copies' loader workers (predicted), and how much
    of the best collocation's predicted gain that host's part explains."""
    more = table[table["mode"] == "workers"]
    shared = table[(table["mode"] != "workers") & table["fits"]]
    if more.empty or shared.empty:
        return
    best = shared.iloc[0]
    same = more[more["mix"] == best["mix"]]
    if same.empty:
        return
    host = same.iloc[0]
    print(f"  input-bound alone: {host['config']} is predicted at {host['predicted_gain']:.2f} x without sharing "
          f"the GPU; the host explains {best['host_explains']:.0%} of {best['config']} x{best['n_jobs']}'s predicted "
          f"gain of {best['predicted_gain']:.2f} (in log terms; docs/attribution.md). Try more loader workers first.")

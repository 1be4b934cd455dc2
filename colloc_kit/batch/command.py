"""`colloc-kit batch` on the command line: its options, and its handler, which loads the notebook machinery
(papermill, nbconvert, plotly) only when a batch runs, so that every other subcommand starts without it.

    >>> parse_parameters(["COPIES=[1,2]", "AMP=bf16"])
    {'COPIES': [1, 2], 'AMP': 'bf16'}
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from colloc_kit.batch.profiles import load_profiles
from colloc_kit.errors import BadInput

__all__ = ["add_subcommand", "main_batch", "parse_parameters"]


def add_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `colloc-kit batch` on the CLI's subparsers; its handler is `main_batch`."""
    names = ", ".join(load_profiles())
    parser = subparsers.add_parser("batch", help="execute the notebooks headless (papermill) into HTML reports")
    parser.add_argument("--profile", help=f"parameter profile: {names} (default: gpu-quick with a GPU, else cpu-smoke)")
    parser.add_argument("-p", "--parameter", dest="parameters", action="append", default=[], metavar="KEY=VALUE",
                        help="set a notebook parameter (YAML value), e.g. -p COPIES=[1,2] ; repeatable")
    parser.add_argument("--out", default="batch-runs", help="folder for the executed notebooks (default: batch-runs)")
    parser.add_argument("--only", nargs="+", metavar="NOTEBOOK", help="run only these notebooks, e.g. 03 07_analysis")
    parser.add_argument("--notebooks", help="folder of the notebooks (default: the checkout's notebooks/)")
    parser.add_argument("--show-code", action="store_true", help="keep the code cells in the HTML reports")
    parser.add_argument("--self-contained", action="store_true",
                        help="inline plotly.js once in each report (about 4.7 MB more a page) so that a page works "
                             "alone, copied or mailed; default: one plotly.min.js beside the pages")
    parser.set_defaults(handler=main_batch)
    return parser


def main_batch(args: argparse.Namespace) -> int:
    """0 when every notebook ran without error, 1 otherwise; bad input raises BadInput (exit 2)."""
    from colloc_kit.batch.runner import run_batch  # noqa: PLC0415 - the notebook machinery, loaded when a batch runs

    report = run_batch(profile=args.profile, out=args.out, overrides=parse_parameters(args.parameters),
                       only=args.only, notebooks_dir=args.notebooks, show_code=getattr(args, "show_code", False),
                       self_contained=getattr(args, "self_contained", False))
    return 1 if report.failed else 0


def parse_parameters(items: list[str]) -> dict[str, Any]:
    """['COPIES=[1,2]', 'AMP=bf16'] -> {'COPIES': [1, 2], 'AMP': 'bf16'} (values read as YAML)."""
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"-p takes KEY=VALUE, got {item!r}; e.g. -p COPIES=[1,2]")
        try:
            values[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise BadInput(f"-p {item}: the value is not valid YAML ({exc})") from None
    return values

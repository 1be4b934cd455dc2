"""`colloc-kit reference ...`: list the shipped reference sets, and export runs as one.

    colloc-kit reference list
    colloc-kit reference export runs/seed-33 runs/seed-37 --name h100-80gb \\
        --fact "commands=colloc-kit run seed-33 --out runs" --fact "left out=experiment 35 (time)"

The top-level CLI calls `add_subcommands(subparsers)`; the handler is `main_reference(args) -> exit code`.
"""

from __future__ import annotations

import argparse
from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.reference import SHIPPED, available, export

__all__ = ["add_subcommands", "main_reference", "parse_facts"]


def add_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `reference list` and `reference export` to the top-level subparsers."""
    parser = subparsers.add_parser("reference", help="reference data: the shipped sets, and exporting runs as one")
    sub = parser.add_subparsers(dest="reference_command", required=True)
    sub.add_parser("list", help="the reference sets installed with the package")
    out = sub.add_parser("export", help="write runs as a reference set: compact Parquet tables and a README")
    out.add_argument("runs", nargs="+", help="experiment folders (or folders of them) holding run directories")
    out.add_argument("--name", required=True, help="the set's name, e.g. h100-80gb")
    out.add_argument("--to", default=str(SHIPPED), help="where the set's folder goes (default: the package's)")
    out.add_argument("--fact", action="append", default=[], metavar="KEY=TEXT",
                     help="a README line under heading KEY, e.g. 'commands=colloc-kit run seed-33'; repeatable")
    parser.set_defaults(handler=main_reference)
    return parser


def main_reference(args: argparse.Namespace) -> int:
    """`colloc-kit reference list|export`: list the shipped sets, or export runs as a new one; exit 0."""
    if args.reference_command == "list":
        names = available()
        print("\n".join(names) if names else f"no reference sets in this install ({SHIPPED})")
        return 0
    folder = export(args.runs, args.name, parse_facts(args.fact), root=args.to)
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"reference set {args.name} written to {folder} ({size / 2**20:.2f} MiB); read it with "
          f"colloc_kit.reference.load({str(folder) if args.to != str(SHIPPED) else args.name!r})")
    return 0


def parse_facts(items: list[str]) -> dict[str, list[str]]:
    """['commands=a', 'commands=b', 'notes=c'] -> {'commands': ['a', 'b'], 'notes': ['c']}."""
    facts: dict[str, list[str]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise BadInput(f"--fact takes KEY=TEXT, got {item!r}; e.g. --fact 'commands=colloc-kit run seed-33'")
        facts.setdefault(key.strip(), []).append(text.strip())
    return facts

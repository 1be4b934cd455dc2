"""`colloc-kit data make`: a stand-in dataset in the real format (image files of random pixels in the real layout,
count and sizes), labelled stand-in wherever it is used.

    colloc-kit data make imagenet64 --root /data [--images N] [--jobs N]

The top-level CLI calls `add_subcommands(subparsers)`; the handler is `cmd_data_make(args) -> exit code`.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from colloc_kit.worker.standin import make

__all__ = ["add_subcommands", "cmd_data_make"]


def add_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `data make` to the top-level subparsers."""
    data = subparsers.add_parser("data", help="datasets: make stand-ins in the real formats (random pixels)")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    make = data_sub.add_parser("make", help="write a stand-in dataset: image files of random pixels in the real "
                                            "layout, count and sizes (labelled stand-in wherever it is used)")
    make.add_argument("name", choices=("cifar10", "imagenet64", "imagenet"))
    make.add_argument("--root", required=True, help="folder to write ROOT/NAME/train/<class>/<image> under")
    make.add_argument("--images", type=int, help="training images in all (default: the real dataset's count)")
    make.add_argument("--jobs", type=int, help="processes writing in parallel (default: the cores)")
    make.add_argument("--quiet", action="store_true", help="no progress bar")
    make.set_defaults(handler=cmd_data_make)
    return data


def cmd_data_make(args: argparse.Namespace) -> int:
    """`colloc-kit data make`: a stand-in dataset in the real format; exit 0."""
    folder = make(args.name, args.root, images=args.images, jobs=args.jobs, progress=not args.quiet)
    print(f"stand-in {args.name} written to {folder}; train on it with --dataset imagefolder --data-root "
          f"{shlex.quote(str(folder))}")
    return 0

"""`colloc-kit info`: what this machine offers (the host, GPUs with MIG and GPM, MPS, versions), every sharing mode
and whether it runs here; with `--models`, the models the worker can train.

    colloc-kit info [--json] [--models]

The top-level CLI calls `add_subcommand(subparsers)`; the handler is `cmd_info(args) -> exit code`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from colloc_kit import machine
from colloc_kit.modes import availability
from colloc_kit.worker import MODEL_NAMES

__all__ = ["add_subcommand", "cmd_info"]


def add_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add `info` to the top-level subparsers."""
    info = subparsers.add_parser("info", help="what this machine offers: GPUs, MIG, MPS, GPM, versions")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.add_argument("--models", action="store_true", help="also list the models the worker can train")
    info.set_defaults(handler=cmd_info)
    return info


def cmd_info(args: argparse.Namespace) -> int:
    """`colloc-kit info`: the host, GPUs, MPS, every sharing mode and whether it runs here; exit 0."""
    info = machine.describe()
    info["modes"] = availability(device="cuda" if info["gpus"] else "cpu")
    if args.models:
        info["models"] = list(MODEL_NAMES)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    host, versions = info["host"], info["versions"]
    print(f"host      {host['hostname']}: {host['cpu']}, {host['logical_cores']} cores, {host['memory_mb']:,} MiB")
    print("software  " + ", ".join(f"{k} {v}" for k, v in versions.items() if v))
    print(f"commit    {info['git_commit'] or 'not a git checkout'}")
    if not info["gpus"]:
        print(f"GPUs      none ({info['gpu_reason']}); jobs can run with --device cpu")
    for gpu in info["gpus"]:
        mig = gpu["mig_mode"]
        pending = " (change pending)" if mig and mig["current"] != mig["pending"] else ""
        mig_text = (f"MIG {'enabled' if mig['current'] else 'disabled'}{pending}"
                    if mig else f"no MIG ({gpu['mig_reason']})")
        gpm_text = "GPM metrics" if gpu["gpm_supported"] else f"no GPM ({gpu['gpm_reason'] or 'not supported'})"
        print(f"GPU {gpu['index']}     {gpu['name']}, {gpu['memory_mb']:,} MiB, driver {gpu['driver']}, "
              f"CUDA {gpu['cuda_driver']}; {mig_text}; {gpm_text}")
    mps, daemons = info["mps"]["control_binary"], info["mps"]["daemons_running"]
    print(f"MPS       {'control at ' + mps if mps else 'nvidia-cuda-mps-control not found'}; "
          f"{len(daemons)} daemon process(es) running" + "".join(f"\n          {d}" for d in daemons))
    for row in info["modes"]:
        print(f"mode      {row['mode']:<10} {'runs here' if row['runs_here'] else 'not here: ' + row['why_not']}; "
              f"{row['summary']}" + (f" Options: {', '.join(row['options'])}." if row["options"] else ""))
    if args.models:
        print("models    " + ", ".join(info["models"]))
    return 0

"""`colloc-kit mig ...`: plan layouts (no GPU needed) and show the GPU's MIG state (read-only).

    colloc-kit mig plan 3g.40gb,2g.20gb,1g.10gb,1g.10gb --gpu H100-80GB
    colloc-kit mig plan 4g,4g --gpu A100-40GB          # exit 2, with the reasons and close layouts
    colloc-kit mig propose 30000,15000,3000 --gpu H100-80GB
    colloc-kit mig show [--gpu-index 0] [--json]

The top-level CLI calls `add_subcommands(subparsers)`; the handler is `main_mig(args) -> exit code`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from colloc_kit.errors import BadInput, GpuStateError, NvmlUnavailable
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GPU_MODELS, GpuModel, gpu_model
from colloc_kit.gpu.mig_live import live_catalogue
from colloc_kit.gpu.mig_planner import plan, propose_layouts
from colloc_kit.gpu.mig_read import read_state

__all__ = ["DEFAULT_MODEL", "EXIT_BAD_INPUT", "EXIT_OK", "add_subcommands", "main_mig"]

EXIT_OK, EXIT_BAD_INPUT = 0, 2
DEFAULT_MODEL = "H100-80GB"


def add_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `mig plan`, `mig propose` and `mig show` to the top-level subparsers."""
    mig = subparsers.add_parser("mig", help="MIG layouts: plan (no GPU needed), propose, show (read-only)")
    sub = mig.add_subparsers(dest="mig_command", required=True)
    models = ", ".join(GPU_MODELS)
    plan_cmd = sub.add_parser("plan", help="exact placements for a layout, or why it cannot exist")
    plan_cmd.hint = ("write the layout as profiles, e.g. `colloc-kit mig plan 3g,2g,1g` or `mig plan 7x1g`: a count is "
                     "a whole number of at least 1, and a word that starts with '-' is read as an option")
    plan_cmd.add_argument("layout", help="profiles, comma-separated: 3g.40gb,2g.20gb,1g.10gb or 3g,2g,1g or 7x1g")
    plan_cmd.add_argument("--gpu", help=f"GPU model ({models}); default: this machine's GPU, else {DEFAULT_MODEL}")
    propose = sub.add_parser("propose", help="layouts that give each job an instance with enough memory")
    propose.add_argument("memory", help="each job's peak memory in MiB, comma-separated, e.g. 30000,15000,3000")
    propose.add_argument("--gpu", help=f"GPU model ({models}); default: this machine's GPU, else {DEFAULT_MODEL}")
    propose.add_argument("--headroom", type=int, default=1024, help="MiB added to each job (default 1024)")
    show = sub.add_parser("show", help="the GPU's MIG mode, instances and MIG device UUIDs (changes nothing)")
    show.add_argument("--gpu-index", type=int, default=0, help="GPU index (default 0)")
    show.add_argument("--json", action="store_true", help="print JSON")
    mig.set_defaults(handler=main_mig)
    return mig


def main_mig(args: argparse.Namespace) -> int:
    """Run one `mig` subcommand; returns the exit code (2 for an impossible layout or a bad argument)."""
    try:
        if args.mig_command == "show":
            return _show(args)
        model = _model(args.gpu)
        if args.mig_command == "plan":
            print(plan(args.layout, model).describe())
            return EXIT_OK
        needs = _memory_needs(args.memory)
        if args.headroom < 0:
            raise BadInput(f"--headroom must be 0 or more MiB, got {args.headroom}; e.g. --headroom 1024")
        for rank, found in enumerate(propose_layouts(needs, model, headroom_mib=args.headroom)):
            print(f"option {rank + 1}: {found.layout()}\n{found.describe()}")
        return EXIT_OK
    except (BadInput, ValueError) as exc:  # ImpossibleLayout is a BadInput
        print(f"colloc-kit mig: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _memory_needs(text: str) -> list[float]:
    """Each job's peak memory in MiB from '30000,15000,3000'; BadInput for anything but positive numbers."""
    try:
        needs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        needs = []
    if not needs or not all(math.isfinite(x) and x > 0 for x in needs):
        raise BadInput(f"memory needs must be positive MiB, comma-separated, got {text[:60]!r}; e.g. 30000,15000,3000")
    return needs


def _model(name: str | None) -> GpuModel:
    """The named built-in model; else this machine's GPU 0 read live; else the default model, saying so."""
    if name is not None:
        if not name.strip():
            raise BadInput(f"--gpu is empty; give a GPU model ({', '.join(GPU_MODELS)}), or leave --gpu out to plan "
                           f"for this machine's GPU")
        return gpu_model(name)
    try:
        live = live_catalogue(0)
    except (NvmlUnavailable, GpuStateError) as exc:
        print(f"(could not read this machine's MIG profiles: {exc}; planning for {DEFAULT_MODEL}, give --gpu MODEL "
              f"for another)", file=sys.stderr)
        return gpu_model(DEFAULT_MODEL)
    if not live.profiles:
        print(f"(GPU 0 {live.name} has no MIG; planning for {DEFAULT_MODEL}, give --gpu MODEL for another)",
              file=sys.stderr)
        return gpu_model(DEFAULT_MODEL)
    return live


def _show(args: argparse.Namespace) -> int:
    try:
        with nvml.session() as lib:
            handle = lib.nvmlDeviceGetHandleByIndex(args.gpu_index)
            name = nvml.text(lib.nvmlDeviceGetName(handle))
            mode = nvml.optional(lib.nvmlDeviceGetMigMode, handle)
            if mode.value is None:
                report = {"gpu": args.gpu_index, "name": name, "mig": f"not supported ({mode.reason})"}
            else:
                report = {"gpu": args.gpu_index, "name": name,
                          **read_state(lib, handle, live_catalogue(args.gpu_index)).describe()}
    except NvmlUnavailable as exc:
        report = {"gpu": None, "mig": f"no NVIDIA GPU here: {exc}; `colloc-kit mig plan` works without one"}
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    if report["gpu"] is None:
        print(report["mig"])
        return EXIT_OK
    print(f"GPU {report['gpu']}: {report['name']}")
    if "mig" in report:
        print(f"  MIG: {report['mig']}")
        return EXIT_OK
    pending = "" if report["pending_mode"] == report["mig_mode"] else f" (pending: {report['pending_mode']})"
    print(f"  MIG mode: {report['mig_mode']}{pending}")
    for inst in report["instances"]:
        print(f"  GPU instance {inst['gpu_instance']}: {inst['profile']} at {inst['placement']}, "
              f"{inst['compute_instances']} compute instance(s): {', '.join(inst['uuids']) or '-'}")
    if report["mig_mode"] == "enabled" and not report["instances"]:
        print("  no MIG instances")
    return EXIT_OK

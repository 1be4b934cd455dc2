"""`colloc-kit run`'s flags: declared (the job's from `JobSpec`, the sharing modes' from their `takes`, Slurm's from
`SlurmOptions`), and read back into the `ExperimentSpec` they describe, on top of a YAML spec or alone.

    >>> import argparse
    >>> run = argparse.ArgumentParser(prog="colloc-kit run")
    >>> add_run_arguments(run)
    >>> args = run.parse_args(["--model", "smallcnn", "--device", "cpu", "--mode", "naive", "--copies", "1,2"])
    >>> spec = experiment_from_args(args)
    >>> spec.copies, spec.modes[0].name, spec.jobs[0].model
    ([1, 2], 'naive', 'smallcnn')
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any, Callable

from colloc_kit.errors import BadInput
from colloc_kit.modes.registry import mode_class, registered, usable
from colloc_kit.pipeline.executors.slurm import SlurmOptions
from colloc_kit.spec import PLACEMENTS, ExperimentSpec, JobSpec, with_changes
from colloc_kit.spec.yaml_files import bundled_specs, read_yaml

__all__ = ["add_mode_options", "add_run_arguments", "experiment_from_args", "mode_option_names", "EXAMPLES",
           "HIDDEN_FLAGS"]

EXAMPLES = """examples:
  colloc-kit run cpu-smoke                                   a bundled spec (below), on a machine without a GPU
  colloc-kit run --model resnet18 --mode exclusive,naive,mps --copies 1,2,4 --seconds 10
  colloc-kit run seed-mixed --steps 60 --out runs            a bundled spec with a flag on top
  colloc-kit run my-spec.yaml --gpus all                     your own spec, its cells spread over the GPUs
  colloc-kit run seed-33 --plan                              the cells and how each runs here; nothing runs
  colloc-kit run seed-33 --gpus all --plan --budget-min 20   ... and whether they fit 20 minutes on all GPUs
  colloc-kit show runs/cpu-smoke                             the stored runs as tables, with their gains"""
HIDDEN_FLAGS = ("fail_at_step", "fail_kind")  # fault injection for the kit's own tests: taken, not advertised


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    """`colloc-kit run`'s arguments: the spec, the experiment's flags, Slurm's, the job's and the modes' options."""
    run.add_argument("spec", nargs="?", help="a YAML experiment spec: a bundled one's name (below) or a file")
    run.add_argument("--mode", type=_csv(str), help=f"sharing mode(s): {', '.join(usable()[0])} (comma-separated)")
    run.add_argument("--copies", type=_csv(int), help="copies of the job group(s), e.g. 1,2,4")
    run.add_argument("--repeats", type=int, help="repeats of every (mode, copies)")
    run.add_argument("--name", help="experiment name (folder under --out)")
    run.add_argument("--gpu", type=int, help="GPU index")
    run.add_argument("--time-limit", dest="time_limit_s", type=float, help="per-job limit in seconds after the start")
    run.add_argument("--no-monitor", dest="monitor", action="store_false", default=None, help="do not sample the GPU")
    run.add_argument("--monitor-interval", dest="monitor_interval_s", type=float, help="seconds between samples")
    run.add_argument("--out", default="runs", help="results folder (default: runs)")
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.add_argument("--placement", choices=PLACEMENTS,
                     help="pinned (default): each job its own block of the host's cores, none idle; unpinned: no "
                          "affinity, as the OS schedules them (as the seed study ran)")
    run.add_argument("--warm-repeats", dest="warm_repeats", action="store_true", default=None,
                     help="measure a cell's repeats as consecutive windows of one launch of its jobs (built, loaded "
                          "and primed once; its cells are not the cold ones: they never mix)")
    run.add_argument("--feed-swaps", dest="feed_swaps", action="store_true", default=None,
                     help="with --warm-repeats: measure each GPU-only twin on its cell's launch, its feed swapped in "
                          "the same jobs (model, optimizer and cuDNN's choices kept; its cells never mix with twins "
                          "launched afresh)")
    run.add_argument("--mlflow", metavar="URI", help="also log each cell, as it completes, to this MLflow tracking "
                     "server (pip install 'colloc-kit[mlflow]'); one it cannot reach is a warning, the runs go on")
    run.add_argument("--gpus", type=_gpus,
                     help="spread the cells over these GPUs, one cell per GPU at a time: 0,1 or all")
    run.add_argument("--plan", action="store_true", help="list the cells (how each runs here, which are done) and an "
                                                         "estimated time; run nothing (no GPU needed)")
    run.add_argument("--budget-min", type=float, metavar="N", help="with --plan: say whether every cell (baselines and "
                     "the precision repeats counted) fits N minutes of wall time")
    slurm = run.add_argument_group("Slurm (pip install 'colloc-kit[slurm]'; --out on a folder the nodes share)")
    slurm.add_argument("--slurm", action="store_true", default=None, help="submit one array task per cell (submitit)")
    for option in SlurmOptions.flags():
        slurm.add_argument("--" + option.name.replace("_", "-"), dest=option.name, help=option.metadata["help"],
                           type=int if "int" in str(option.type) else str)
    modes = run.add_argument_group("sharing-mode options (a flag goes to the modes of the run that take it)")
    JobSpec.add_arguments(run.add_argument_group("job options"))
    add_mode_options(modes, taken=set(run._option_string_actions))
    for action in run._actions:
        if action.dest in HIDDEN_FLAGS:
            action.help = argparse.SUPPRESS
    specs = "\n".join(f"  {name:<22} {_summary(path)}" for name, path in bundled_specs().items())
    run.formatter_class = argparse.RawDescriptionHelpFormatter
    run.epilog = f"{EXAMPLES}\n\nbundled specs (give the name as SPEC; a file of your own works the same):\n{specs}"


def _summary(spec: Any) -> str:
    """A bundled spec's first comment line: what it runs."""
    first = next((line for line in spec.read_text(encoding="utf-8").splitlines() if line.startswith("#")), "# ")
    text = first.lstrip("# ").strip()
    return text if len(text) <= 90 else text[:87].rsplit(" ", 1)[0] + " ..."


def add_mode_options(group: argparse._ArgumentGroup, taken: set[str]) -> None:
    """One flag per option the modes that load declare (an option several modes take: one flag, each named)."""
    owners: dict[str, list] = {}
    for name, cls in usable()[0].items():
        for option in cls.takes:
            owners.setdefault(option.name, []).append((name, option))
    for key, declared in owners.items():
        option = declared[0][1]
        if option.flag in taken:
            raise BadInput(f"mode {declared[0][0]}'s option {key} clashes with the flag {option.flag} of "
                           f"`colloc-kit run`; rename the option")
        text = "; ".join(f"{name}: {o.help}" for name, o in declared).replace("%", "%%")
        if option.type is bool:
            group.add_argument(option.flag, dest=key, action="store_true", default=None, help=text)
        else:
            group.add_argument(option.flag, dest=key, type=_csv(option.type) if option.many else option.type,
                               help=text)


def mode_option_names() -> set[str]:
    """Every option name some registered mode takes."""
    return {name for cls in registered().values() for name in cls.option_names}


def experiment_from_args(args: argparse.Namespace, data: dict | None = None) -> ExperimentSpec:
    """The experiment the flags describe: a YAML spec (its mapping `data`, else read from args.spec) with flags on
    top, or flags alone."""
    job_fields = {f.name for f in fields(JobSpec)}
    job_flags = {k: v for k, v in vars(args).items() if k in job_fields}
    top = {k: getattr(args, k) for k in ("copies", "repeats", "name", "gpu", "time_limit_s", "monitor",
                                        "monitor_interval_s", "gpus", "placement", "mlflow", "warm_repeats",
                                        "feed_swaps")
           if getattr(args, k) is not None}
    slurm = {o.name: getattr(args, o.name) for o in SlurmOptions.flags() if getattr(args, o.name) is not None}
    option_names = mode_option_names()
    mode_options = {k: _one_or_list(v) for k, v in vars(args).items() if k in option_names and v is not None}
    if args.spec:
        data = read_yaml(args.spec) if data is None else data
        if isinstance(data.get("jobs"), list):  # anything else: ExperimentSpec.from_mapping explains what it must be
            data["jobs"] = [_override(group, job_flags) for group in data["jobs"]]
    else:
        if "model" not in job_flags:
            raise BadInput("give a YAML spec or at least --model (e.g. colloc-kit run --model resnet18 --copies 2)")
        data = {"jobs": [job_flags]}
    data.update(top)
    if args.slurm or slurm:
        if not (args.slurm or isinstance(data.get("slurm"), dict)):
            raise BadInput(f"--{next(iter(slurm)).replace('_', '-')} is a Slurm option; add --slurm to submit to Slurm")
        data["slurm"] = {**(data.get("slurm") or {}), **slurm}
    if args.mode is not None:  # `--mode ""` is refused (no mode), never the default
        data["modes"] = _with_options([{"name": m} for m in args.mode], mode_options)
    elif mode_options:
        named = [m if isinstance(m, dict) else {"name": m} for m in data.get("modes") or ["naive"]]
        data["modes"] = _with_options(named, mode_options)
    return ExperimentSpec.from_mapping(data)


def _with_options(modes: list[dict], options: dict) -> list[dict]:
    """Each mode with the command line's options that it takes (`--mode naive,mps --thread-percentage 50` limits
    MPS only); an option that none of the modes takes is refused."""
    takes = {m["name"]: mode_class(m["name"]).option_names for m in modes}
    unused = sorted(k for k in options if not any(k in names for names in takes.values()))
    if unused:
        flags = ", ".join("--" + k.replace("_", "-") for k in unused)
        owners = ", ".join(name for name, cls in registered().items() if set(unused) & set(cls.option_names))
        raise BadInput(f"{flags} is an option of mode {owners}, and no mode of this run ({', '.join(takes)}) takes it; "
                       f"add that mode to --mode or drop {flags}")
    return [{**m, **{k: v for k, v in options.items() if k in takes[m["name"]]}} for m in modes]


def _override(group: Any, job_flags: dict) -> Any:
    """A YAML job group with the command line's job flags on top; a budget flag replaces the group's budget."""
    if not isinstance(group, dict):
        return group  # ExperimentSpec.from_mapping explains what a group must be
    return with_changes(group, job_flags)


def _csv(kind: type) -> Callable[[str], list]:
    """An argparse type: comma-separated values, each read with `kind`."""
    def parse(text: str) -> list:
        try:
            return [kind(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            values = "whole numbers, such as 1,2,4" if kind is int else f"{kind.__name__} values"
            raise argparse.ArgumentTypeError(f"expected comma-separated {values}; got {text!r}") from None
    return parse


def _gpus(text: str) -> str | list[int]:
    return "all" if text.strip() == "all" else _csv(int)(text)


def _one_or_list(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], str) else value

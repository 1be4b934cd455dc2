"""The `colloc-kit` command: info, demo, run, show, status, mig, batch, reference, advise.

    colloc-kit info [--json]
    colloc-kit run [SPEC.yaml] [--mode naive,exclusive] [--model resnet18] [--copies 1,2,4] [--steps 200] ...
    colloc-kit run SPEC.yaml --gpus 0,1          (or --slurm --partition gpu --time-min 30)
    colloc-kit run seed-33 --data-root DIR [--plan]   (the seed study's experiments 33-37, see colloc_kit/seed.py)
    colloc-kit show runs/experiment
    colloc-kit status runs/experiment
    colloc-kit mig plan 3g,2g,1g,1g --gpu H100-80GB
    colloc-kit batch [--profile cpu-smoke]
    colloc-kit reference export runs/seed-33 --name h100-80gb
    colloc-kit --debug run ...        # tracebacks too, not only the one-line message

Exit codes: 0 every job complete, 1 some job failed (or a run broke: a full disk, a folder gone), 2 bad input
(nothing started), 130 interrupted. `show` exits 1 when it skipped a broken run, naming it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import traceback
from dataclasses import fields
from pathlib import Path
from typing import Any

from .errors import BadInput, CollocKitError
from .pipeline.executors.slurm import SlurmOptions
from .spec import ExperimentSpec, JobSpec, read_yaml, with_changes
from .statuses import COMPLETE

EXIT_OK, EXIT_FAILED_JOBS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
JOB_COLUMNS = ["mode_label", "copies", "repeat", "job", "status", "error_kind", "images_per_s",
               "images_per_s_overlap", "bound_by", "input_wait_share", "steady_gpu_memory_mb", "peak_memory_mb"]
RUN_COLUMNS = ["mode_label", "copies", "repeat", "status", "n_complete", "n_jobs", "aggregate_images_per_s",
               "aggregate_images_per_s_ci", "throughput_window", "bound_by", "flags"]


def main(argv: list[str] | None = None) -> int:
    """The `colloc-kit` command: parse, run the subcommand, turn errors into one line and an exit code."""
    try:
        parser = build_parser()
    except BadInput as exc:  # a mode plug-in (COLLOC_KIT_MODES) that does not load
        print(f"colloc-kit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except BadInput as exc:
        return _refuse(args, str(exc), EXIT_BAD_INPUT)
    except CollocKitError as exc:
        return _refuse(args, str(exc), EXIT_FAILED_JOBS)
    except OSError as exc:  # the environment broke under a run: a full disk, a folder removed or made read-only
        where = exc.filename or getattr(args, "out", None)  # a failed flush does not say which file
        where = f"{where}: " if where else ""
        return _refuse(args, f"{where}{exc.strerror or exc}; free space or fix the folder's permissions, then run "
                             "again (what was written before is kept)", EXIT_FAILED_JOBS)
    except KeyboardInterrupt:
        return _refuse(args, "interrupted; what was measured is on disk, marked interrupted", EXIT_INTERRUPTED)


def _refuse(args: argparse.Namespace, message: str, code: int) -> int:
    """One line on stderr (and the traceback with --debug); returns the exit code."""
    if args.debug:
        traceback.print_exc()
    print(f"colloc-kit: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag; `run`'s mode options come from the registered modes' declarations."""
    from .modes import registered

    parser = argparse.ArgumentParser(prog="colloc-kit", description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the traceback of every error, not only a message")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="what this machine offers: GPUs, MIG, MPS, GPM, versions")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.add_argument("--models", action="store_true", help="also list the models the worker can train")
    info.set_defaults(handler=cmd_info)

    run = sub.add_parser("run", help="run an experiment from flags or a YAML spec (flags override the spec)")
    run.add_argument("spec", nargs="?", help="YAML experiment spec (see README)")
    run.add_argument("--mode", type=_csv(str), help=f"sharing mode(s): {', '.join(registered())} (comma-separated)")
    run.add_argument("--copies", type=_csv(int), help="copies of the job group(s), e.g. 1,2,4")
    run.add_argument("--repeats", type=int, help="repeats of every (mode, copies)")
    run.add_argument("--name", help="experiment name (folder under --out)")
    run.add_argument("--gpu", type=int, help="GPU index")
    run.add_argument("--time-limit", dest="time_limit_s", type=float, help="per-job limit in seconds after the start")
    run.add_argument("--no-monitor", dest="monitor", action="store_false", default=None, help="do not sample the GPU")
    run.add_argument("--monitor-interval", dest="monitor_interval_s", type=float, help="seconds between samples")
    run.add_argument("--out", default="runs", help="results folder (default: runs)")
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.add_argument("--gpus", type=_gpus,
                     help="spread the cells over these GPUs, one cell per GPU at a time: 0,1 or all")
    run.add_argument("--plan", action="store_true", help="list the cells (how each runs here, which are done) and an "
                                                         "estimated time; run nothing (no GPU needed)")
    slurm = run.add_argument_group("Slurm (pip install 'colloc-kit[slurm]'; --out on a folder the nodes share)")
    slurm.add_argument("--slurm", action="store_true", default=None, help="submit one array task per cell (submitit)")
    for option in SlurmOptions.flags():
        slurm.add_argument("--" + option.name.replace("_", "-"), dest=option.name, help=option.metadata["help"],
                           type=int if "int" in str(option.type) else str)
    modes = run.add_argument_group("sharing-mode options (a flag goes to the modes of the run that take it)")
    JobSpec.add_arguments(run.add_argument_group("job options"))
    add_mode_options(modes, taken=set(run._option_string_actions))
    run.set_defaults(handler=cmd_run)

    demo = sub.add_parser("demo", help="the default experiment: gpu-demo on a GPU machine, else cpu-smoke")
    demo.add_argument("--out", default="runs", help="results folder (default: runs)")
    demo.set_defaults(handler=cmd_demo)

    show = sub.add_parser("show", help="print a stored run or a folder of runs")
    show.add_argument("path", help="run directory or a folder of them")
    show.add_argument("--json", action="store_true", help="print the jobs as JSON records")
    show.add_argument("--strict", action="store_true", help="fail on the first broken run instead of skipping it")
    show.set_defaults(handler=cmd_show)

    status = sub.add_parser("status", help="an experiment folder's cells: done, running, failed, pending (Slurm jobs)")
    status.add_argument("path", help="the experiment folder (<out>/<name>)")
    status.set_defaults(handler=cmd_status)

    data = sub.add_parser("data", help="datasets: make stand-ins in the real formats (random pixels)")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    make = data_sub.add_parser("make", help="write a stand-in dataset: image files of random pixels in the real "
                                            "layout, count and sizes (labelled stand-in wherever it is used)")
    make.add_argument("name", choices=("cifar10", "imagenet64", "imagenet"))
    make.add_argument("--root", required=True, help="folder to write ROOT/NAME/train/<class>/<image> under")
    make.add_argument("--images", type=int, help="training images in all (default: the real dataset's count)")
    make.add_argument("--jobs", type=int, help="processes writing in parallel (default: the cores)")
    make.add_argument("--quiet", action="store_true", help="no progress bar")
    make.set_defaults(handler=cmd_data_make)

    from .advise_cli import add_subcommand as add_advise
    from .batch import add_subcommand as add_batch
    from .mig_cli import add_subcommands as add_mig
    from .reference.cli import add_subcommands as add_reference

    add_mig(sub)
    add_batch(sub)
    add_reference(sub)
    add_advise(sub)
    return parser


def add_mode_options(group: argparse._ArgumentGroup, taken: set[str]) -> None:
    """One flag per option the registered modes declare (an option several modes take: one flag, each named)."""
    from .modes import registered

    owners: dict[str, list] = {}
    for name, cls in registered().items():
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
    from .modes import registered

    return {name for cls in registered().values() for name in cls.option_names}


def cmd_info(args: argparse.Namespace) -> int:
    """`colloc-kit info`: the host, GPUs, MPS, every sharing mode and whether it runs here."""
    from . import machine
    from .modes import availability

    info = machine.describe()
    info["modes"] = availability(device="cuda" if info["gpus"] else "cpu")
    if args.models:
        from .worker import MODEL_NAMES

        info["models"] = list(MODEL_NAMES)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
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
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """`colloc-kit run`: the experiment the spec and flags describe, its tables, exit 0 or 1."""
    from .pipeline import run_spec

    data = read_yaml(args.spec) if args.spec else None
    if isinstance(data, dict) and "seed" in data:
        return cmd_seed(args, data)
    spec = experiment_from_args(args, data)
    if args.plan:
        return print_plan(spec, args.out)
    results = run_spec(spec, out=args.out, progress=not args.quiet)
    if spec.slurm is not None:
        return EXIT_OK  # submitted; the cells run in Slurm (`colloc-kit status`)
    print_tables(results)
    folder = str(Path(results.runs["run_dir"].iloc[0]).parent) if len(results.runs) else f"{args.out}/{spec.name}"
    print(f"\nstored under {folder} ; read with colloc_kit.load({folder!r}) or `colloc-kit show {shlex.quote(folder)}`")
    complete = "status" in results.jobs and (results.jobs["status"] == COMPLETE).all()
    return EXIT_OK if complete else EXIT_FAILED_JOBS


def cmd_demo(args: argparse.Namespace) -> int:
    """`colloc-kit demo`: the bundled gpu-demo spec on a GPU machine, else cpu-smoke."""
    from . import machine

    gpus, reason = machine.gpu_list()
    name = "gpu-demo" if gpus else "cpu-smoke"
    where = f"on {gpus[0]['name']}" if gpus else f"on the CPU ({reason})"
    print(f"colloc-kit demo: running the bundled spec {name!r} {where}")
    return cmd_run(build_parser().parse_args(["run", name, "--out", args.out]))


def cmd_seed(args: argparse.Namespace, data: dict) -> int:
    """`colloc-kit run seed-NN`: the seed study's experiment NN as it runs on this GPU (colloc_kit/seed.py)."""
    import pandas as pd

    from . import seed as study

    flags = {k: v for k, v in vars(args).items() if v is not None and v is not False}
    takes = {"data_root", "seconds", "warmup_steps", "amp", "repeats", "name", "gpu"}
    given = set(flags) & ({f.name for f in fields(JobSpec)} | mode_option_names() | {o.name for o in SlurmOptions.flags()}
                          | {"copies", "gpus", "time_limit_s"})
    if given - takes:
        raise BadInput(f"{args.spec} runs the study's own jobs and modes; it takes only "
                       f"{', '.join('--' + k.replace('_', '-') for k in sorted(takes))}, not "
                       f"{', '.join('--' + k.replace('_', '-') for k in sorted(given - takes))}")
    seed = study.SeedSpec.from_mapping({**data, **{k: flags[k] for k in takes & set(flags)}})
    if args.plan:
        card = study.Card.here(seed.gpu)
        plan = study.plan_rows(seed, card)
        rows = pd.DataFrame(plan)
        with pd.option_context("display.width", 250, "display.max_colwidth", 90, "display.max_rows", 500):
            print(rows.drop(columns=["runs", "estimate_s"]).to_string(index=False))
        cannot = int((~rows["runs"]).sum())
        print(f"\n{seed.experiment}: {len(rows)} cells ({rows['runs'].sum()} run here, {cannot} cannot be placed), "
              f"{seed.repeats} repeat(s) each; about {study.estimate_s(plan) / 3600:.1f} h on "
              f"the GPU; card: {card.note}; cells already complete under {args.out}/{seed.experiment} are skipped")
        return EXIT_OK
    results = study.run(seed, out=args.out, progress=not args.quiet)
    print_tables(results)
    complete = "status" in results.jobs and (results.jobs["status"] == COMPLETE).all()
    return EXIT_OK if complete else EXIT_FAILED_JOBS


def print_plan(spec: ExperimentSpec, out: str) -> int:
    """The cells of `spec`, each done or to run under out/<name>: what `colloc-kit run` would do."""
    from .pipeline.cells import cells
    from .pipeline.folder import ExperimentFolder
    from .rundir import safe_name

    states = ExperimentFolder.of(out, spec.name).cell_states()
    todo = 0
    for cell in cells(spec):
        done = cell.cell_id in states and states[cell.cell_id].status == COMPLETE
        todo += not done
        print(f"{cell.label:50s} {'done (skipped)' if done else 'to run'}")
    print(f"\n{spec.name}: {todo} of {len(cells(spec))} cells to run under {out}/{safe_name(spec.name)}")
    return EXIT_OK


def experiment_from_args(args: argparse.Namespace, data: dict | None = None) -> ExperimentSpec:
    """The experiment the flags describe: a YAML spec (its mapping `data`, else read from args.spec) with flags on
    top, or flags alone."""
    job_fields = {f.name for f in fields(JobSpec)}
    job_flags = {k: v for k, v in vars(args).items() if k in job_fields}
    top = {k: getattr(args, k) for k in ("copies", "repeats", "name", "gpu", "time_limit_s", "monitor",
                                        "monitor_interval_s", "gpus") if getattr(args, k) is not None}
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
    if args.mode:
        data["modes"] = _with_options([{"name": m} for m in args.mode], mode_options)
    elif mode_options:
        named = [m if isinstance(m, dict) else {"name": m} for m in data.get("modes") or ["naive"]]
        data["modes"] = _with_options(named, mode_options)
    return ExperimentSpec.from_mapping(data)


def _with_options(modes: list[dict], options: dict) -> list[dict]:
    """Each mode with the command line's options that it takes (`--mode naive,mps --thread-percentage 50` limits
    MPS only); an option that none of the modes takes is refused."""
    from .modes import mode_class, registered

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


def cmd_data_make(args: argparse.Namespace) -> int:
    """`colloc-kit data make`: a stand-in dataset in the real format."""
    from .standin import make

    folder = make(args.name, args.root, images=args.images, jobs=args.jobs, progress=not args.quiet)
    print(f"stand-in {args.name} written to {folder}; train on it with --dataset imagefolder --data-root '{folder}'")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """`colloc-kit show`: stored runs as tables (or JSON); exit 1 when a broken run was skipped."""
    from .results import load

    if not Path(args.path).exists():
        raise BadInput(f"{args.path} does not exist; give a run directory or a folder of runs")
    results = load(args.path, strict=args.strict)
    for path, problem in results.broken.items():
        print(f"colloc-kit: skipped the broken run {path}: {problem}", file=sys.stderr)
    if results.runs.empty:
        raise BadInput(f"no readable runs (manifest.json) under {args.path}")
    if args.json:
        print(results.jobs.to_json(orient="records", indent=2))
    else:
        print_tables(results)
    return EXIT_FAILED_JOBS if results.broken else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """`colloc-kit status`: an experiment folder's cells and their statuses."""
    import pandas as pd

    from .pipeline.status import experiment_status
    from .statuses import CELL_STATUSES

    rows = experiment_status(args.path)
    if not rows:
        raise BadInput(f"no cells under {args.path}; give an experiment folder (<out>/<name>) that `colloc-kit run` "
                       "wrote")
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(table.fillna("").to_string(index=False))
    counts = table["status"].value_counts()
    print("\n" + ", ".join(f"{counts[s]} {s}" for s in CELL_STATUSES if s in counts))
    return EXIT_OK


def print_tables(results) -> None:
    """The runs and jobs tables of `results`, as `run` and `show` print them."""
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:,.2f}".format):
        print("\nruns\n" + results.runs[[c for c in RUN_COLUMNS if c in results.runs]].to_string(index=False))
        print("\njobs\n" + results.jobs[[c for c in JOB_COLUMNS if c in results.jobs]].to_string(index=False))


def _csv(kind: type):
    def parse(text: str) -> list:
        try:
            return [kind(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__} values, got {text!r}") from None
    return parse


def _gpus(text: str) -> str | list[int]:
    return "all" if text.strip() == "all" else _csv(int)(text)


def _one_or_list(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], str) else value


if __name__ == "__main__":
    sys.exit(main())

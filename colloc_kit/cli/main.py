"""The `colloc-kit` command: info, demo, run, show, status, mig, batch, reference, advise, export.

    colloc-kit info [--json]
    colloc-kit run [SPEC.yaml] [--mode naive,exclusive] [--model resnet18] [--copies 1,2,4] [--steps 200] ...
    colloc-kit run SPEC.yaml --gpus 0,1          (or --slurm --partition gpu --time-min 30)
    colloc-kit run seed-33 --data-root DIR [--plan]   (the seed study's experiments 33-37: experiments/seed.py)
    colloc-kit show runs/experiment
    colloc-kit status runs/experiment
    colloc-kit mig plan 3g,2g,1g,1g --gpu H100-80GB
    colloc-kit batch [--profile cpu-smoke]
    colloc-kit reference export runs/seed-33 --name h100-80gb
    colloc-kit export mlflow runs/experiment --tracking-uri http://127.0.0.1:5000
    colloc-kit --debug run ...        # tracebacks too, not only the one-line message

Exit codes: 0 every job complete, 1 some job failed (or a run broke: a full disk, a folder gone), 2 bad input
(nothing started), 130 interrupted. `show` exits 1 when it skipped a broken run, naming it.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import shlex
import sys
import traceback
from dataclasses import fields
from pathlib import Path
from typing import NoReturn, TextIO

import pandas as pd
import psutil

from colloc_kit import machine
from colloc_kit.analysis.results import Results, load
from colloc_kit.batch.command import add_subcommand as add_batch
from colloc_kit.cli.advise import add_subcommand as add_advise
from colloc_kit.cli.export import add_subcommands as add_export
from colloc_kit.cli.data import add_subcommands as add_data
from colloc_kit.cli.gains import print_gains
from colloc_kit.cli.info import add_subcommand as add_info
from colloc_kit.cli.mig import add_subcommands as add_mig
from colloc_kit.cli.plans import print_plan, print_seed_plan
from colloc_kit.cli.reference import add_subcommands as add_reference
from colloc_kit.cli.skipped import name_damaged, name_skipped
from colloc_kit.cli.run_args import add_run_arguments, experiment_from_args, mode_option_names
from colloc_kit.errors import BadInput, BrokenPlugin, BrokenRun, CollocKitError, shorten
from colloc_kit.experiments import seed as study
from colloc_kit.experiments import seed_run
from colloc_kit.interrupts import EXIT_INTERRUPTED
from colloc_kit.modes.registry import usable
from colloc_kit.paths import check_folder, shown
from colloc_kit.pipeline import run_spec
from colloc_kit.pipeline.executors.slurm import SlurmOptions
from colloc_kit.pipeline.status import experiment_status
from colloc_kit.spec import JobSpec
from colloc_kit.spec.yaml_files import read_yaml
from colloc_kit.statuses import CELL_STATUSES, COMPLETE, FAILED, RUNNING
from colloc_kit.store.folder import ExperimentFolder
__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED_JOBS, EXIT_BAD_INPUT, EXIT_CLOSED_PIPE = 0, 1, 2, 141  # 141: 128 + SIGPIPE, as a shell says
INTERRUPTED_SAYS = {  # what Ctrl-C leaves, by command
    "run": "interrupted; what was measured is on disk, marked interrupted",
    "demo": "interrupted; what was measured is on disk, marked interrupted",
    "advise": "interrupted; what --confirm measured is on disk, marked interrupted",
    "data": "interrupted; the images written are kept: the same command again finishes the dataset",
    "batch": "interrupted; the notebooks executed so far are kept",
}
MODE_COMMANDS = ("run", "demo", "info")  # whose flags, help or answer are the sharing modes': a broken plug-in refuses
OS_ADVICE = (  # (error numbers, what to do): an OSError that reaches the command, said by its cause
    ({errno.ENOSPC, errno.EDQUOT, errno.EFBIG}, "free space (or raise the quota), then run again"),
    ({errno.EACCES, errno.EPERM, errno.EROFS}, "fix the folder's permissions (or give a writable one), then run again"),
    ({errno.ENAMETOOLONG}, "give a shorter name or folder, then run again"),
    ({errno.ENOTDIR, errno.EISDIR, errno.EEXIST}, "a file stands where a folder should be (or the reverse): move it "
                                                  "away, then run again"),
    ({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE}, "the system refused a process, memory or a file (a "
     "limit such as `ulimit -u` or `-n`): close programs or ask for fewer --jobs/--copies, then run again"),
    ({errno.ENOENT}, "a file or folder vanished during the command; run again"),
)
JOB_COLUMNS = ["mode_label", "copies", "repeat", "job", "status", "error_kind", "images_per_s",
               "images_per_s_overlap", "bound_by", "input_wait_share", "steady_gpu_memory_mb", "peak_memory_mb",
               "role", "latency_p50_ms", "latency_p99_ms", "slo_share"]  # an inference job's (analysis.latency)
RUN_COLUMNS = ["mode_label", "copies", "repeat", "status", "n_complete", "n_jobs", "aggregate_images_per_s",
               "aggregate_images_per_s_ci", "throughput_window", "bound_by", "flags", "serve_starved"]


def main(argv: list[str] | None = None) -> int:
    """The `colloc-kit` command: parse, run the subcommand, turn errors into one line and an exit code."""
    _printable(sys.stdout, sys.stderr)
    try:
        parser = build_parser()
        if (broken := usable()[1]) is not None and _command(argv) in MODE_COMMANDS:
            raise broken
    except (BadInput, BrokenPlugin) as exc:  # e.g. a mode plug-in (COLLOC_KIT_MODES) that does not load
        print(f"colloc-kit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
        return code
    except (BadInput, BrokenRun, BrokenPlugin) as exc:  # refused before anything started
        return _refuse(args, str(exc), EXIT_BAD_INPUT)
    except CollocKitError as exc:
        return _refuse(args, str(exc), EXIT_FAILED_JOBS)
    except BrokenPipeError as exc:
        if _stdout_closed():  # the reader went away (`| head`): nothing to say, and no one to say it to
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_CLOSED_PIPE
        return _refuse(args, _os_problem(exc, args), EXIT_FAILED_JOBS)
    except OSError as exc:  # the environment broke under a run: a full disk, a folder removed or made read-only
        return _refuse(args, _os_problem(exc, args), EXIT_FAILED_JOBS)
    except KeyboardInterrupt:
        return _refuse(args, INTERRUPTED_SAYS.get(args.command, "interrupted"), EXIT_INTERRUPTED)


def _command(argv: list[str] | None) -> str | None:
    """The subcommand `argv` names (None where it names none), read before the whole parse."""
    first = _Parser(add_help=False)
    first.add_argument("--debug", action="store_true")
    first.add_argument("command", nargs="?")
    return first.parse_known_args(sys.argv[1:] if argv is None else argv)[0].command


class _Parser(argparse.ArgumentParser):
    """argparse, with its one-line refusals shortened (a 100 KB value is not echoed whole) and followed by the
    command's `hint` where it has one (what to write instead; a subcommand's module sets it)."""

    hint = ""

    def error(self, message: str) -> NoReturn:
        """Usage and the shortened message (and the hint) on stderr, exit 2."""
        super().error(shorten(message) + (f"; {self.hint}" if self.hint else ""))


def _refuse(args: argparse.Namespace, message: str, code: int) -> int:
    """One line on stderr (and the traceback with --debug); returns the exit code."""
    if args.debug:
        traceback.print_exc()
    print(f"colloc-kit: {shorten(message)}", file=sys.stderr)
    return code


def _os_problem(exc: OSError, args: argparse.Namespace) -> str:
    """What an OSError during a command means, and what to do about it, by its error number."""
    where = exc.filename or getattr(args, "out", None)  # a failed flush does not say which file
    where = f"{shown(where)}: " if where else ""
    advice = next((text for numbers, text in OS_ADVICE if exc.errno in numbers),
                  "fix the cause, then run again")
    return f"{where}{exc.strerror or exc}; {advice} (what was written before is kept)"


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on its write end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(mask & select.POLLERR for _, mask in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stream (a test's capture)
        return False


def _printable(*streams: TextIO) -> None:
    """Text the terminal cannot encode (a folder name that is not UTF-8) is printed escaped, never an error."""
    for stream in streams:
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag; `run`'s mode options come from the registered modes' declarations."""
    parser = _Parser(prog="colloc-kit", description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the traceback of every error, not only a message")
    sub = parser.add_subparsers(dest="command", required=True)

    add_info(sub)

    run = sub.add_parser("run", help="run an experiment from flags or a YAML spec (flags override the spec)")
    add_run_arguments(run)
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

    add_data(sub)
    add_mig(sub)
    add_batch(sub)
    add_reference(sub)
    add_advise(sub)
    add_export(sub)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    """`colloc-kit run`: the experiment the spec and flags describe, its tables, exit 0 or 1."""
    if args.budget_min is not None and not args.plan:
        raise BadInput("--budget-min says whether a plan fits: give it with --plan (nothing runs then)")
    data = read_yaml(args.spec) if args.spec else None
    if isinstance(data, dict) and "seed" in data:
        return cmd_seed(args, data)
    spec = experiment_from_args(args, data)
    if args.plan:
        return print_plan(spec, args.out, args.budget_min)
    name_damaged(ExperimentFolder.writable(args.out, spec.name), "warning: ")  # its cells read as not run: run anew
    results = run_spec(spec, out=args.out, progress=not args.quiet)
    if spec.slurm is not None:
        return EXIT_OK  # submitted; the cells run in Slurm (`colloc-kit status`)
    print_tables(results)
    folder = str(Path(results.runs["run_dir"].iloc[0]).parent) if len(results.runs) else f"{args.out}/{spec.name}"
    print(f"\nstored under {folder} ; read with colloc_kit.load({folder!r}) or `colloc-kit show {shlex.quote(folder)}`")
    print_failures(results)
    complete = "status" in results.jobs and results.jobs["status"].isin([COMPLETE, RUNNING]).all()  # RUNNING: a
    return EXIT_OK if complete else EXIT_FAILED_JOBS  # cell left to another kit on the folder, under way there


def cmd_demo(args: argparse.Namespace) -> int:
    """`colloc-kit demo`: the bundled gpu-demo spec on a GPU machine, else cpu-smoke."""
    gpus, reason = machine.gpu_list()
    name = "gpu-demo" if gpus else "cpu-smoke"
    where = f"on {gpus[0]['name']}" if gpus else f"on the CPU ({reason})"
    print(f"colloc-kit demo: running the bundled spec {name!r} {where}")
    return cmd_run(build_parser().parse_args(["run", name, "--out", args.out]))


def cmd_seed(args: argparse.Namespace, data: dict) -> int:
    """`colloc-kit run seed-NN`: the seed study's experiment NN as it runs on this GPU (`experiments/seed.py`)."""
    flags = {k: v for k, v in vars(args).items() if v is not None and v is not False}
    takes = {"data_root", "seconds", "until_ci", "min_seconds", "warmup_steps", "amp", "repeats", "name", "gpu", "gpus",
             "placement", "mlflow", "warm_repeats", "feed_swaps"}
    given = set(flags) & ({f.name for f in fields(JobSpec)} | mode_option_names()
                          | {o.name for o in SlurmOptions.flags()}
                          | {"copies", "gpus", "time_limit_s", "placement", "warm_repeats", "feed_swaps"})
    if given - takes:
        raise BadInput(f"{args.spec} runs the study's own jobs and modes; it takes only "
                       f"{', '.join('--' + k.replace('_', '-') for k in sorted(takes))}, not "
                       f"{', '.join('--' + k.replace('_', '-') for k in sorted(given - takes))}")
    seed = study.SeedSpec.from_mapping({**data, **{k: flags[k] for k in takes & set(flags)}})
    if args.plan:
        return print_seed_plan(seed, args.out, args.budget_min)
    name_damaged(ExperimentFolder.writable(args.out, seed.experiment), "warning: ")  # as a YAML spec's run says it
    results = seed_run.run(seed, out=args.out, progress=not args.quiet, started_at=psutil.Process().create_time())
    print_tables(results)
    print_failures(results)
    complete = "status" in results.jobs and (results.jobs["status"] == COMPLETE).all()
    return EXIT_OK if complete else EXIT_FAILED_JOBS


def cmd_show(args: argparse.Namespace) -> int:
    """`colloc-kit show`: stored runs as tables (or JSON); exit 1 when a broken run was skipped or a damaged one read
    in part."""
    path = check_folder(args.path, "run folder", exists=True)
    results = load(path, strict=args.strict)
    skipped = name_skipped(results)
    if results.runs.empty:
        raise BadInput(f"no readable runs (manifest.json) under {shown(path)}; give a run directory or a folder of "
                       "runs")
    if args.json:
        print(results.jobs.to_json(orient="records", indent=2))
    else:
        print_tables(results)
    return EXIT_FAILED_JOBS if skipped else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """`colloc-kit status`: an experiment folder's cells and their statuses; exit 1 when something in the folder
    could not be read (each named)."""
    path = check_folder(args.path, "experiment folder", exists=True)
    rows = experiment_status(path)
    problems = name_damaged(ExperimentFolder(path))
    if not rows:
        raise BadInput(f"no cells under {shown(path)}; give an experiment folder (<out>/<name>) that `colloc-kit run` "
                       "wrote")
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(table.fillna("").to_string(index=False))
    counts = table["status"].value_counts()
    print("\n" + ", ".join(f"{counts[s]} {s}" for s in CELL_STATUSES if s in counts))
    return EXIT_FAILED_JOBS if problems else EXIT_OK


def print_failures(results: Results) -> None:
    """One line on stderr per failed job: which, in which run, why, and what to do where the machine is the cause."""
    jobs = results.jobs.reindex(columns=["job", "run_id", "status", "error"])
    for job in jobs[jobs["status"] == FAILED].itertuples():
        advice = next((text for numbers, text in OS_ADVICE
                       if any(os.strerror(n) in str(job.error) for n in numbers)), None)
        print(f"colloc-kit: {job.job} of run {job.run_id} failed: {job.error}" + (f"; {advice}" if advice else ""),
              file=sys.stderr)


def print_tables(results: Results) -> None:
    """The runs and jobs tables of `results`, as `run` and `show` print them."""
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:,.2f}".format):
        for name, frame, columns in (("runs", results.runs, RUN_COLUMNS), ("jobs", results.jobs, JOB_COLUMNS)):
            shown = frame[[c for c in columns if c in frame]]  # what a row lacks as a dash (None prints as None)
            text = {c: shown[c].astype(object).fillna("-") for c in shown.select_dtypes(exclude="number")}
            print(f"\n{name}\n" + shown.assign(**text).to_string(index=False, na_rep="-"))
    print_gains(results)

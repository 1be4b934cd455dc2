r"""Does the kit scale with a machine's GPUs on a matrix like a user's, and what does a cell cost beyond its window?

`run`: 36 cells (the seed recipe's timm ResNet-26 on stand-in CIFAR-10, made here with `colloc-kit data make`, and a
synthetic ResNet-26; naive and MPS at 1, 2 and 3 copies; 3 repeats) on 1, 2 and all GPUs of this machine, a pass each,
the same cores per lane in each (the host's split by its GPUs). Before a pass: its estimate, cells x (window + a cell's
seconds beyond it: measured by the passes so far, else 10 s) / GPUs; one that does not fit what is left of --budget-s
is not started. A pass ends with its record, `gpus-N/pass.json`: a later command with the same --out, settings and
card reads it instead of running the pass again; a pass folder without one (cut short) is refused. Under --out, after
each pass, over every recorded pass: `walls.csv` (wall time, speed-up over the fewest GPUs'), `figures.csv` (per
workload, mode and copies: each pass's mean images/s with its 95 % CI, and whether it agrees with the fewest GPUs'),
`lanes.csv` (`cell_phases.lane_phases`), `scaling.md`; `cells.csv` after each experiment (the kit's API hands a run's
cells back only at its end).

`ab`: the old cell path against the new one (`COLLOC_KIT_QUICK_START=0` / `1`) on one GPU, interleaved round by round
(old, new; then new, old), each arm's cells in a folder of their own: images/s of lone and collocated cells side by
side with their CIs, and each arm's median overhead per cell beyond its window. `--autotune-off` adds a third arm, new
path with `cudnn_autotune: off` (another workload: its figures are shown apart, never as the study's), which says what
the study's cuDNN autotuning costs a cell.

    python3 benchmarks/scaling/scaling.py run --out OUT/scaling --seconds 5              # 1, 2 and all GPUs
    python3 benchmarks/scaling/scaling.py ab --out OUT/ab --rounds 3 --autotune-off     # one GPU, old path against new
    python3 benchmarks/scaling/scaling.py run --out /tmp/s --tiny --passes 1 --seconds 1 --repeats 2    # the CPU with
    python3 benchmarks/scaling/scaling.py run --out /tmp/s --tiny --passes 2 --seconds 1 --repeats 2    # stand-in GPUs

Lent machines, two calls of at most 9 minutes, the pass folders carried between them as a tar. 36 cells x (3-s window
+ 10 s) = 468 s on one GPU (5-s windows overran 600 s on a four-H200's one GPU: more than the one-H100 A/B's 8.4 s),
18 x 13 = 234 s on two, 9 x 13 = 117 s on four. Call 1, the one-GPU pass, 468 s + about 15 s of data and start under
`--budget-s 505` (`timeout 515` ends an overrun; tables and tar still come back), on `nvidia-h100-x2`/`-h200-x2` and
on a four-GPU kind alike:

    export PYTHONUNBUFFERED=1; S=/tmp/scaling; timeout -k 10 515 python3 benchmarks/scaling/scaling.py run --out $S \
      --seconds 3 --passes 1 --budget-s 505; cp $S/*.csv $S/*.md $OUT/; tar czf $OUT/passes.tgz -C $S gpus-1

Then here: `echo /.carry/ >> .git/info/exclude; mkdir -p .carry; cp FILES_AT/passes.tgz .carry/`. Call 2 carries
`.carry`, on the same kind (a pass of another card is refused): two GPUs `--passes 2` (234 s), four `--passes 2,4`
(351 s):

    export PYTHONUNBUFFERED=1; S=/tmp/scaling; mkdir -p $S; tar xzf .carry/passes.tgz -C $S; timeout -k 10 515 \
      python3 benchmarks/scaling/scaling.py run --out $S --seconds 3 --passes 2,4 --budget-s 505; cp $S/*.csv $S/*.md \
      $OUT/; tar czf $OUT/passes.tgz -C $S $(cd $S && echo gpus-*)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from cell_phases import cell_phases
from scaling_passes import PASS_RECORD, Passes, overlap, recorded_passes, refuse

import colloc_kit
from colloc_kit import machine, supervise
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import SimulatedNvml
from colloc_kit.pipeline.executors.gpus import kept_lanes
from colloc_kit.spec import ExperimentSpec
from colloc_kit.stats import ci95
from colloc_kit.worker.process import QUICK_START
from colloc_kit.worker.standin import make

__all__ = ["matrix", "main"]

SEED_JOB = {"model": "timm.resnet26", "dataset": "imagefolder", "recipe": "seed", "batch_size": 128, "amp": "off"}
SYNTHETIC_JOB = {"model": "resnet26", "batch_size": 128, "image_size": 224, "amp": "off"}
TINY_JOB = {"model": "smallcnn", "device": "cpu", "batch_size": 8, "image_size": 32, "workers": 0, "interval_s": 0.2,
            "synthetic_samples": 64}
STANDIN_IMAGES = 10_000  # stand-in CIFAR-10 images: enough for a 5-s window's epochs, quick to write



def matrix(seconds: float, data_root: Path | None, tiny: bool, repeats: int = 3, autotune: str = "study",
           warmup_steps: int = 10) -> list[ExperimentSpec]:
    """The benchmark's experiments: one per workload (a user's matrix runs its workloads one after another).
    `tiny`: the CPU's smallcnn in place of both, naive and exclusive (no MPS on the CPU)."""
    timed = {"seconds": seconds, "warmup_steps": warmup_steps, "cudnn_autotune": autotune}
    if tiny:
        jobs = {"tiny-a": {**TINY_JOB, **timed}, "tiny-b": {**TINY_JOB, **timed, "seed": 1}}
        modes, copies = ["naive", "exclusive"], [1, 2]
    else:
        jobs = {"seed-r26": {**SEED_JOB, **timed, "data_root": str(data_root)},
                "synthetic-r26": {**SYNTHETIC_JOB, **timed}}
        modes, copies = ["naive", "mps"], [1, 2, 3]
    return [ExperimentSpec.from_mapping({"name": name, "jobs": [job], "modes": modes, "copies": copies,
                                         "repeats": repeats}) for name, job in jobs.items()]


@contextlib.contextmanager
def cores(allowed: list[int]):
    """This process (and what it starts) on `allowed` cores only, for a while."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, allowed)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run_pass(specs: list[ExperimentSpec], gpus: int, settings: dict, out: Path,
             after_each: Callable[[list[Path]], None]) -> dict:
    """The experiments on the first `gpus` GPUs, `settings["per_lane"]` cores each, into `out`, `after_each` called
    with the experiments done after each; at its end its record, `out/pass.json`: wall time, span, settings."""
    allowed = supervise.host_cores()[:gpus * settings["per_lane"]]
    t0 = time.time()
    with cores(allowed), kept_lanes():  # the experiments' cells through one set of lanes, as `seed-NN` runs its own
        for done, spec in enumerate(specs, 1):
            colloc_kit.run_spec(spec.__class__.from_mapping({**spec.to_dict(), "gpus": list(range(gpus))}), out=out,
                                progress=False)
            after_each([out / earlier.name for earlier in specs[:done]])
    t1 = time.time()
    runs = colloc_kit.load(out).runs
    wall = {"gpus": gpus, "cores": len(allowed), "wall_s": t1 - t0, "t0": t0, "t1": t1, "cells": len(runs),
            "complete": int((runs["status"] == "complete").sum()), "machine": _machine(), "settings": settings}
    (out / PASS_RECORD).write_text(json.dumps(wall, indent=1) + "\n")
    return wall


def cmd_run(args: argparse.Namespace) -> int:
    """The passes not yet recorded under --out, each while its estimate fits --budget-s, then the tables over every
    recorded pass (see the module)."""
    started = time.monotonic()
    passes, here = _passes(args.passes)
    settings = {"seconds": args.seconds, "warmup_steps": args.warmup_steps, "repeats": args.repeats,
                "cudnn_autotune": args.cudnn_autotune, "tiny": args.tiny, "images": args.images,
                "per_lane": max(1, len(supervise.host_cores()) // here), "card": _card()}
    recorded = recorded_passes(args.out, settings)
    todo = [gpus for gpus in passes if gpus not in recorded]
    data_root = None if args.tiny or not todo else _standin(args.data_root or args.out / 'data', args.images)
    specs = matrix(args.seconds, data_root, args.tiny, args.repeats, args.cudnn_autotune, args.warmup_steps)
    done = Passes(args.out, specs)
    for gpus in sorted(recorded):
        print(f"{gpus} GPU(s): read from {args.out / f'gpus-{gpus}' / PASS_RECORD} ({recorded[gpus]['wall_s']:.1f} s"
              f", {recorded[gpus]['machine']}), not run again", flush=True)
        done.add(recorded[gpus])
    if recorded:
        _write_tables(args, done, sorted(recorded))
    cells = sum(len(spec.modes) * len(spec.copies) * spec.repeats for spec in specs)
    for gpus in todo:
        estimate, how = done.estimate(cells, gpus, args.seconds)
        left = None if args.budget_s is None else args.budget_s - (time.monotonic() - started)
        print(f"{gpus} GPU(s): estimate {estimate:.0f} s ({how})" + (f"; {left:.0f} s left of --budget-s" if left
                                                                     is not None else ""), flush=True)
        if left is not None and estimate > left:
            print(f"scaling: the {gpus}-GPU pass not started: its estimate does not fit the {left:.0f} s left of "
                  f"--budget-s {args.budget_s:g}; run it in a later command with this --out (its pass folders "
                  f"carried) and --passes {','.join(map(str, todo[todo.index(gpus):]))}", flush=True)
            break
        wall = run_pass(specs, gpus, settings, args.out / f"gpus-{gpus}", lambda e, g=gpus: done.write_cells(g, e))
        print(f"{gpus} GPU(s): {wall['complete']}/{wall['cells']} cells complete in {wall['wall_s']:.1f} s",
              flush=True)
        done.add(wall)
        _write_tables(args, done, sorted(recorded))  # after each pass: a command cut short keeps what it measured
    return 0


def _passes(given: str) -> tuple[list[int], int]:
    """The GPU counts of the passes, `all` as this machine's count, each once, in the order given; and that count."""
    here = len(machine.gpu_list()[0])
    counts = [here if p == "all" else int(p) if p.isdigit() else 0 for p in given.split(",")]
    if min(counts) < 1 or max(counts) > here:
        refuse(f"--passes takes GPU counts from 1 to {here} (this machine's) or all, got {given!r}")
    return list(dict.fromkeys(counts)), here


def _write_tables(args: argparse.Namespace, done: Passes, read: list[int]) -> None:
    """The tables of `done` and scaling.md under --out; `read`: the GPUs of the passes read from their records."""
    tables = done.tables()
    _write(args.out, "scaling", tables, _run_notes(args, tables, read))


def _standin(root: Path, images: int) -> Path:
    """Stand-in CIFAR-10 under `root` (kept between commands), as `colloc-kit data make cifar10` writes it."""
    return make("cifar10", root, images=images, progress=False)


def _run_notes(args: argparse.Namespace, tables: dict[str, pd.DataFrame], read: list[int]) -> list[str]:
    """What the tables say in words; `read`: the GPUs of the passes read from their records (earlier commands)."""
    walls, figs, lanes = tables["walls"], tables["figures"], tables["lanes"]
    later = figs[figs["gpus"] != walls["gpus"].iloc[0]]
    notes = [f"command: `python3 benchmarks/scaling/scaling.py run --out {args.out} --seconds {args.seconds:g} "
             f"--warmup-steps {args.warmup_steps} --repeats {args.repeats} --passes {args.passes} --cudnn-autotune "
             f"{args.cudnn_autotune}{' --tiny' if args.tiny else ''}`; machine: {_machine()}"
             + (f"; passes on {', '.join(map(str, read))} GPU(s) read from their {PASS_RECORD} (an earlier command's, "
                f"its machine in walls.csv)" if read else ""),
             f"cudnn_autotune {args.cudnn_autotune}" + (" (another workload than the study's: these figures never mix "
                                                        "with the study's)" if args.cudnn_autotune != "study" else ""),
             f"figures agree with the first pass's (95 % CIs over the repeats overlap) in "
             f"{int(later['agrees_with_first'].sum())} of {len(later)} (experiment, mode, copies) rows of later passes"]
    for _, wall in walls.iterrows():
        mine = lanes[lanes["gpus"] == wall["gpus"]]
        notes.append(f"{int(wall['gpus'])} GPU(s): {wall['wall_s']:.1f} s, {wall['speed_up']:.2f}x; overhead beyond "
                     f"the window per cell (a lane's time but its windows and idle end, over its cells): median "
                     f"{statistics.median(mine['overhead_per_cell_s']):.1f} s")
    return notes


def cmd_ab(args: argparse.Namespace) -> int:
    """Old path against new on GPU 0, interleaved (see the module)."""
    data_root = None if args.tiny else _standin(args.data_root or args.out / 'data', args.images)
    arms = [("old", "0", "study"), ("new", "1", "study")] + ([("new-autotune-off", "1", "off")]
                                                              if args.autotune_off else [])
    jobs, cells = [], []
    for round_ in range(args.rounds):
        for arm, quick, autotune in (arms if round_ % 2 == 0 else arms[::-1]):
            os.environ[QUICK_START] = quick
            spec = matrix(args.seconds, data_root, args.tiny, args.repeats, autotune, args.warmup_steps)[0]
            spec = spec.__class__.from_mapping({**spec.to_dict(), "name": f"{arm}-r{round_}",
                                                "modes": spec.to_dict()["modes"][:1], "copies": [1, 3]})
            colloc_kit.run_spec(spec, out=args.out / arm, progress=False)
            folder = args.out / arm / spec.name
            jobs.append(colloc_kit.load(folder).jobs.assign(arm=arm, round=round_))
            cells += [{"arm": arm, "round": round_, **row} for row in _with_gaps(cell_phases(folder))]
    os.environ.pop(QUICK_START, None)
    tables = {"ab_figures": _ab_figures(pd.concat(jobs)), "ab_cells": pd.DataFrame(cells)}
    return _write(args.out, "ab", tables, _ab_notes(args, tables))


def _with_gaps(rows: list[dict]) -> list[dict]:
    """`cell_phases` rows of one lane, each with the gap to the next cell and its overhead beyond its window (wall
    time and that gap, less the window; the lane's last cell: no gap)."""
    rows = sorted(rows, key=lambda r: r["started_at"])
    for row, after in zip(rows, [*rows[1:], None]):
        row["gap_s"] = after["started_at"] - row["ended_at"] if after else 0.0
        row["overhead_s"] = row["wall_s"] + row["gap_s"] - row["window_s"]
        row["first_of_lane"] = row is rows[0]  # it also waits for the lane's zygote: a lane's cost, not a cell's
    return rows


def _ab_figures(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per arm and copies: the mean over its cells of their jobs' mean images/s, with its 95 % CI, and whether each
    arm agrees with the old path's (CIs overlap; the autotune-off arm is another workload: compared, never mixed)."""
    per_cell = jobs.groupby(["arm", "run_id", "copies"])["images_per_s"].mean().reset_index()
    rows = []
    for (arm, copies), cell in per_cell.groupby(["arm", "copies"], sort=False):
        mean, half = ci95(cell["images_per_s"])
        rows.append({"arm": arm, "copies": copies, "cells": len(cell), "job_images_per_s": mean, "ci": half})
    table = pd.DataFrame(rows)
    old = table[table["arm"] == "old"].set_index("copies")
    return table.assign(agrees_with_old=[overlap(r["job_images_per_s"], r["ci"], old.loc[r["copies"],
                                                  "job_images_per_s"], old.loc[r["copies"], "ci"])
                                         for _, r in table.iterrows()])


def _ab_notes(args: argparse.Namespace, tables: dict[str, pd.DataFrame]) -> list[str]:
    cells = tables["ab_cells"]
    notes = [f"command: `python3 benchmarks/scaling/scaling.py ab --out {args.out} --rounds {args.rounds} --repeats "
             f"{args.repeats} --seconds {args.seconds:g} --warmup-steps {args.warmup_steps}"
             f"{' --autotune-off' if args.autotune_off else ''}"
             f"{' --tiny' if args.tiny else ''}`; machine: {_machine()}"]
    for arm, mine in cells[~cells["first_of_lane"]].groupby("arm", sort=False):
        medians = {phase: mine[phase].median() for phase in ("overhead_s", "build_s", "primed_s", "gap_s")}
        notes.append(f"{arm}: median overhead beyond the window per cell {medians['overhead_s']:.1f} s over "
                     f"{len(mine)} cells, each lane's first left out (it waits for the zygote): model build "
                     f"{medians['build_s']:.1f} s, first step {medians['primed_s']:.1f} s, gap to the next cell "
                     f"{medians['gap_s']:.1f} s")
    return notes


def _card() -> str:
    """This machine's GPU model(s): a pass recorded on another card is never compared with this one's."""
    return ", ".join(sorted({g["name"] for g in machine.gpu_list()[0]})) or "no GPU"


def _machine() -> str:
    gpus, why = machine.gpu_list()
    return f"{len(gpus)} x {_card()}, {len(supervise.host_cores())} cores" if gpus else f"no GPU ({why})"


def _write(out: Path, name: str, tables: dict[str, pd.DataFrame], notes: list[str]) -> int:
    """Each table as OUT/<table>.csv, all of them and `notes` as OUT/<name>.md; the notes on stdout too."""
    out.mkdir(parents=True, exist_ok=True)
    text = [f"# {name}", "", *[f"- {n}" for n in notes]]
    for key, table in tables.items():
        table.to_csv(out / f"{key}.csv", index=False)
        shown = table if key not in ("cells", "ab_cells") else table.groupby(
            ["gpus" if key == "cells" else "arm", "jobs"], sort=False)[
            ["wall_s", "ready_s", "build_s", "primed_s", "window_s"]].median().reset_index()
        text += ["", f"## {key}" + (" (medians)" if shown is not table else ""), "", *_markdown(shown)]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    print("\n".join(notes))
    return 0


def _markdown(table: pd.DataFrame) -> list[str]:
    """A markdown table (pandas' own needs tabulate, which the device machine lacks)."""
    def cell(value) -> str:
        return f"{value:,.2f}" if isinstance(value, float) else str(value)

    return ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns),
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "ab"):
        one = sub.add_parser(name)
        one.add_argument("--out", type=Path, required=True)
        one.add_argument("--seconds", type=float, default=5.0, help="measured seconds per job")
        one.add_argument("--images", type=int, default=STANDIN_IMAGES, help="stand-in CIFAR-10 images")
        one.add_argument("--data-root", type=Path, help="where the stand-in CIFAR-10 is made (default: OUT/data)")
        one.add_argument("--tiny", action="store_true", help="the CPU's smallcnn on stand-in GPUs: a quick check")
        one.add_argument("--warmup-steps", type=int, default=10)
    sub.choices["run"].add_argument("--passes", default="1,2,all", help="GPU counts, one pass each: 1,2,all")
    sub.choices["run"].add_argument("--repeats", type=int, default=3)
    sub.choices["run"].add_argument("--budget-s", type=float, help="seconds this command may take: a pass whose "
                                    "estimate does not fit what is left is not started")
    sub.choices["run"].add_argument("--cudnn-autotune", choices=("study", "off"), default="study",
                                    help="the jobs' cudnn_autotune (off: another workload, labelled so)")
    sub.choices["ab"].add_argument("--rounds", type=int, default=2, help="rounds of the arms, order alternating")
    sub.choices["ab"].add_argument("--repeats", type=int, default=2, help="repeats of each cell in an arm's round")
    sub.choices["ab"].add_argument("--autotune-off", action="store_true",
                                   help="a third arm: the new path with cudnn_autotune off (another workload)")
    args = parser.parse_args(argv)
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=4)) if args.tiny else contextlib.nullcontext():
        return cmd_run(args) if args.command == "run" else cmd_ab(args)


if __name__ == "__main__":
    sys.exit(main())

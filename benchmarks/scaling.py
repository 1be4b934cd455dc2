"""Does the kit scale with a machine's GPUs on a matrix like a user's, and what does a cell cost beyond its window?

`run`: 36 cells (the seed recipe's timm ResNet-26 on stand-in CIFAR-10, made here with `colloc-kit data make`, and a
synthetic ResNet-26; naive and MPS at 1, 2 and 3 copies; 3 repeats) on 1, 2 and all GPUs of this machine, one pass
after another in one command. Each pass gets the same cores per lane (the host's cores split by the most GPUs of any
pass), so a lane's loader-bound cells measure alike whatever the pass. Written under --out: `walls.csv` (wall time and
speed-up per pass), `figures.csv` (per workload, mode and copies: each pass's mean images/s over the repeats with its
95 % CI, and whether it agrees with one GPU's), `lanes.csv` (where each lane's time went: `cell_phases.lane_phases`),
`cells.csv`, and `scaling.md`.

`ab`: the old cell path against the new one (`COLLOC_KIT_QUICK_START=0` / `1`) on one GPU, interleaved round by round
(old, new; then new, old), each arm's cells in a folder of their own: images/s of lone and collocated cells side by
side with their CIs, and each arm's median overhead per cell beyond its window. `--autotune-off` adds a third arm, new
path with `cudnn_autotune: off` (another workload: its figures are shown apart, never as the study's), which says what
the study's cuDNN autotuning costs a cell.

    python3 benchmarks/scaling.py run --out OUT/scaling --seconds 5              # 1, 2 and all GPUs
    python3 benchmarks/scaling.py ab --out OUT/ab --rounds 3 --autotune-off     # one GPU, old path against new
    python3 benchmarks/scaling.py run --out /tmp/s --tiny --passes 1,2          # the CPU with stand-in GPUs: a check
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
from cell_phases import LANE_PHASES, cell_phases, lane_phases

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


def run_pass(specs: list[ExperimentSpec], gpus: int, per_lane: int, out: Path) -> dict:
    """The experiments on the first `gpus` GPUs, `per_lane` cores each, into `out`: its wall time and span."""
    allowed = supervise.host_cores()[:gpus * per_lane]
    t0 = time.time()
    with cores(allowed), kept_lanes():  # the experiments' cells through one set of lanes, as `seed-NN` runs its own
        for spec in specs:
            colloc_kit.run_spec(spec.__class__.from_mapping({**spec.to_dict(), "gpus": list(range(gpus))}), out=out,
                                progress=False)
    t1 = time.time()
    runs = colloc_kit.load(out).runs
    return {"gpus": gpus, "cores": len(allowed), "wall_s": t1 - t0, "t0": t0, "t1": t1, "cells": len(runs),
            "complete": int((runs["status"] == "complete").sum())}


def figures(results: dict[int, colloc_kit.Results]) -> pd.DataFrame:
    """Per (experiment, mode, copies): each pass's mean aggregate and per-job images/s over the repeats, each with
    its 95 % CI (Student's t over the repeats), and whether it agrees with the first pass's (the CIs overlap)."""
    rows = []
    for gpus, found in results.items():
        job_means = found.jobs.groupby("run_id")["images_per_s"].mean()
        runs = found.runs.assign(job_mean=found.runs["run_id"].map(job_means))
        for (experiment, mode, copies), cell in runs.groupby(["experiment", "mode_label", "copies"]):
            (agg, agg_ci), (job, job_ci) = ci95(cell["aggregate_images_per_s"]), ci95(cell["job_mean"])
            rows.append({"experiment": experiment, "mode": mode, "copies": copies, "gpus": gpus,
                         "repeats": len(cell), "aggregate_images_per_s": agg, "aggregate_ci": agg_ci,
                         "job_images_per_s": job, "job_ci": job_ci})
    table = pd.DataFrame(rows)
    first = table[table["gpus"] == min(results)].set_index(["experiment", "mode", "copies"])
    agree = []
    for _, row in table.iterrows():
        base = first.loc[(row["experiment"], row["mode"], row["copies"])]
        agree.append(_overlap(row["aggregate_images_per_s"], row["aggregate_ci"], base["aggregate_images_per_s"],
                              base["aggregate_ci"]))
    return table.assign(agrees_with_first=agree)


def _overlap(a: float, a_ci: float, b: float, b_ci: float) -> bool:
    """Whether a +- a_ci and b +- b_ci overlap (a missing CI counts as none: the values must then be equal)."""
    a_ci, b_ci = (0.0 if pd.isna(x) else x for x in (a_ci, b_ci))
    return bool(abs(a - b) <= a_ci + b_ci)


def cmd_run(args: argparse.Namespace) -> int:
    """Every pass, then the tables (see the module)."""
    passes = _passes(args.passes)
    data_root = None if args.tiny else _standin(args.data_root or args.out / 'data', args.images)
    specs = matrix(args.seconds, data_root, args.tiny, args.repeats, args.cudnn_autotune, args.warmup_steps)
    per_lane = len(supervise.host_cores()) // max(passes)
    walls, results, lanes, cells = [], {}, [], []
    for gpus in passes:
        folder = args.out / f"gpus-{gpus}"
        if folder.exists():
            sys.exit(f"scaling: {folder} exists (the kit would reuse its cells, measuring nothing); give a fresh --out")
        wall = run_pass(specs, gpus, per_lane, folder)
        print(f"{gpus} GPU(s): {wall['complete']}/{wall['cells']} cells complete in {wall['wall_s']:.1f} s",
              flush=True)
        walls.append(wall)
        results[gpus] = colloc_kit.load(folder)
        experiments = [folder / spec.name for spec in specs]
        lanes += [{"gpus": gpus, **lane} for lane in lane_phases(experiments, wall["t0"], wall["t1"])]
        cells += [{"gpus": gpus, "experiment": e.name, **row} for e in experiments for row in cell_phases(e)]
        wall_table = pd.DataFrame(walls)  # the tables after each pass: a command cut short keeps what it measured
        wall_table["speed_up"] = wall_table["wall_s"].iloc[0] / wall_table["wall_s"]
        tables = {"walls": wall_table.drop(columns=["t0", "t1"]), "figures": figures(results),
                  "lanes": pd.DataFrame(lanes)[["gpus", "gpu", "cells", *LANE_PHASES, "overhead_per_cell_s"]],
                  "cells": pd.DataFrame(cells)}
        _write(args.out, "scaling", tables, _run_notes(args, tables))
    return 0


def _passes(given: str) -> list[int]:
    """The GPU counts of the passes, `all` as this machine's count, each once, in the order given."""
    here = len(machine.gpu_list()[0])
    counts = [here if p == "all" else int(p) for p in given.split(",")]
    if not counts or min(counts) < 1 or max(counts) > here:
        sys.exit(f"scaling: --passes takes GPU counts from 1 to {here} (this machine's) or all, got {given!r}")
    return list(dict.fromkeys(counts))


def _standin(root: Path, images: int) -> Path:
    """Stand-in CIFAR-10 under `root` (kept between commands), as `colloc-kit data make cifar10` writes it."""
    return make("cifar10", root, images=images, progress=False)


def _run_notes(args: argparse.Namespace, tables: dict[str, pd.DataFrame]) -> list[str]:
    walls, figs, lanes = tables["walls"], tables["figures"], tables["lanes"]
    later = figs[figs["gpus"] != walls["gpus"].iloc[0]]
    notes = [f"command: `python3 benchmarks/scaling.py run --out {args.out} --seconds {args.seconds:g} --warmup-steps "
             f"{args.warmup_steps} --repeats {args.repeats} --passes {args.passes} --cudnn-autotune "
             f"{args.cudnn_autotune}{' --tiny' if args.tiny else ''}`; machine: {_machine()}",
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
    return table.assign(agrees_with_old=[_overlap(r["job_images_per_s"], r["ci"], old.loc[r["copies"],
                                                  "job_images_per_s"], old.loc[r["copies"], "ci"])
                                         for _, r in table.iterrows()])


def _ab_notes(args: argparse.Namespace, tables: dict[str, pd.DataFrame]) -> list[str]:
    cells = tables["ab_cells"]
    notes = [f"command: `python3 benchmarks/scaling.py ab --out {args.out} --rounds {args.rounds} --repeats "
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


def _machine() -> str:
    gpus, why = machine.gpu_list()
    names = sorted({g["name"] for g in gpus})
    return f"{len(gpus)} x {', '.join(names)}, {len(supervise.host_cores())} cores" if gpus else f"no GPU ({why})"


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

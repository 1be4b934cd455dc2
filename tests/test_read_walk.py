"""Reading a run is one trip: `analysis.results.read_run`'s walk through the kit's modules, measured on real runs.

The walk is the order in which `read_run` enters the kit's modules, taken with `sys.setprofile`: each Python call
from a module into another module of `colloc_kit` enters that module (a call within a module is no entry, and the
return to the caller is no entry either: the caller was waiting, not left); entries into the same module one after
another are one stay. Calls into the standard library, pandas, numpy or any other package are ignored: they enter
nothing and end no stay; a kit function they call back is entered from the nearest Python frame (through a builtin,
`map(events.parse, lines)`, from the kit's module that handed it over). The run is read once before the walk is
taken, so imports (the lazy `colloc_kit.analysis` ones) are no part of it.

A return is a stay in a module the walk had already stayed in and left. Issue 54 measured 10 modules in 26 stays with
16 returns (records <-> figures five times, up and down between store, events and analysis); the walk is now at most
12 stays with no return (10 on each run below: a fresh CPU run, an older kit's run, a shipped H100 run).

    python tests/test_read_walk.py RUN_DIR...      # each run's walk, its stays and returns
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

import colloc_kit
from colloc_kit.analysis.results import read_run
from colloc_kit.store.rundir import RunDir

MAX_STAYS = 12
OLD_RUN = Path(__file__).parent / "data" / "kit-b96d848" / "old" / "20261123-004941-naive-x1-r0"
MATRIX_RUNS = Path(__file__).parents[1] / "benchmarks" / "results" / "h100" / "matrix" / "runs.tgz"  # h100-matrix's
H100_RUN = "20261121-025720-mps-x7-r0"  # seven jobs under MPS on an H100, with the monitor's GPU samples
TINY = {"model": "smallcnn", "batch_size": 16, "device": "cpu", "dataset": "synthetic", "image_size": 32,
        "synthetic_samples": 128, "steps": 24, "warmup_steps": 4, "workers": 0, "interval_s": 0.25}


def walk(run: RunDir) -> list[str]:
    """The modules of `colloc_kit` that `read_run(run)` enters, in order, one name per stay."""
    read_run(run)  # once first: imports are no part of the walk
    entered: list[str] = []

    def profile(frame, event, _arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if module.startswith("colloc_kit") and module != caller and (not entered or entered[-1] != module):
            entered.append(module)

    sys.setprofile(profile)
    try:
        read_run(run)
    finally:
        sys.setprofile(None)
    return entered


def returns(stays: list[str]) -> list[str]:
    """The stays in a module the walk had stayed in before (and left).

    >>> returns(["a", "b", "c", "b", "a"])
    ['b', 'a']
    """
    return [module for i, module in enumerate(stays) if module in stays[:i]]


def shown(stays: list[str]) -> str:
    return " -> ".join(m.removeprefix("colloc_kit.") for m in stays)


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory) -> RunDir:
    """A real run: two tiny CPU jobs sharing the machine (naive x2), with the monitor's host samples."""
    out = tmp_path_factory.mktemp("walk")
    colloc_kit.run([TINY], mode="naive", copies=2, out=out, name="walk", progress=False)
    (run,) = [RunDir(p.parent) for p in out.rglob("manifest.json")]
    return run


def h100_run(folder: Path) -> RunDir:
    """One run of the shipped raw H100 runs (`benchmarks/results/h100/matrix/runs.tgz`), unpacked into `folder`."""
    with tarfile.open(MATRIX_RUNS) as packed:
        packed.extractall(folder, [m for m in packed.getmembers() if H100_RUN in m.name], filter="data")
    (manifest,) = folder.rglob("manifest.json")
    return RunDir(manifest.parent)


@pytest.mark.parametrize("which", ["two_jobs", "old_kit", "h100"])
def test_reading_a_run_is_one_trip(which, request, tmp_path):
    """Down once through the store and the analysis, and back: no module entered twice, at most 12 stays. Before
    issue 54: 26 stays and 16 returns (two_jobs), 21 and 12 (old_kit), 49 and 39 (h100)."""
    run = {"two_jobs": lambda: request.getfixturevalue("two_jobs"), "old_kit": lambda: RunDir(OLD_RUN),
           "h100": lambda: h100_run(tmp_path)}[which]()
    stays = walk(run)
    assert len(stays) <= MAX_STAYS and not returns(stays), f"{len(stays)} stays: {shown(stays)}"
    assert stays[0] == "colloc_kit.analysis.results"
    assert {"colloc_kit.store.rundir", "colloc_kit.store.manifest", "colloc_kit.analysis.figures"} <= set(stays)


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        found = walk(RunDir(folder))
        print(f"{folder}: {len(set(found))} modules, {len(found)} stays, {len(returns(found))} returns\n  "
              f"{shown(found)}")

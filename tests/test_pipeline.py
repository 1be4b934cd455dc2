"""The run pipeline's seams: an executor added from one file runs real CPU cells, and every JSON file of the kit is
written through the one atomic write, which a full disk (/dev/full) cannot tear."""

import importlib
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

import colloc_kit
from colloc_kit import atomic
from colloc_kit.errors import BadInput
from colloc_kit.pipeline import executors
from colloc_kit.spec import ExperimentSpec, JobSpec
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import find_runs

PACKAGE = Path(colloc_kit.__file__).parent
TINY = JobSpec(model="smallcnn", device="cpu", steps=6, warmup_steps=2, batch_size=8, workers=0)

INLINE_EXECUTOR = '''
"""A fourth executor, in one file: each cell in this process, no zygote, and a record of what it ran."""
from colloc_kit import machine
from colloc_kit.pipeline.cell import Placement
from colloc_kit.pipeline.executors import Executor, FinishedCell, register
from colloc_kit.pipeline.report import run_reported
from colloc_kit.pipeline.progress import Progress


@register
class InlineExecutor(Executor):
    name = "inline"
    ran = []

    def _submit(self, cells, spec_file):
        info = machine.describe()
        placement = Placement.on(info, self.folder.write_machine(info), 0, self.spec.device)
        handles = []
        for cell in cells:
            reading = run_reported(self.spec, cell, placement, self.folder.out, Progress(1, enabled=False))
            type(self).ran.append((cell.label, spec_file.name))
            handles.append(FinishedCell(cell, reading.summary["status"], reading))
        return handles
'''


@pytest.fixture
def inline_executor(tmp_path, monkeypatch):
    (tmp_path / "inline_executor.py").write_text(INLINE_EXECUTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("inline_executor")
    yield module.InlineExecutor
    executors._REGISTRY.pop("inline", None)
    sys.modules.pop("inline_executor", None)


@pytest.mark.slow
def test_a_fourth_executor_from_one_file_runs_real_cpu_cells(tmp_path, inline_executor):
    spec = ExperimentSpec(jobs=[TINY], copies=[1, 2], name="plugged", monitor=False)
    results = colloc_kit.run_spec(spec, out=tmp_path / "runs", progress=False, executor="inline")
    assert [label for label, _ in inline_executor.ran] == ["naive-x1-r0", "naive-x2-r0"]
    assert list(results.runs["status"]) == ["complete", "complete"]
    assert (results.jobs["images_per_s"] > 0).all()
    assert len(find_runs(tmp_path / "runs" / "plugged")) == 2
    again = colloc_kit.run_spec(spec, out=tmp_path / "runs", progress=False, executor="inline")  # resumes: none
    assert len(inline_executor.ran) == 2 and len(again.runs) == 2


def test_an_unknown_executor_and_bad_executor_options_are_refused_before_anything_starts(tmp_path):
    spec = ExperimentSpec(jobs=[TINY], name="refused", monitor=False)
    with pytest.raises(BadInput, match="executor 'nowhere' is not known; known: gpus, here, slurm"):
        colloc_kit.run_spec(spec, out=tmp_path, executor="nowhere")
    slurm = ExperimentSpec(jobs=[TINY], name="refused", monitor=False, slurm={"time_min": -5})
    with pytest.raises(BadInput, match="slurm: time_min must be a positive whole number, got -5"):
        colloc_kit.run_spec(slurm, out=tmp_path)
    with pytest.raises(BadInput, match="unknown option.*queue.*valid options: partition, time_min"):
        colloc_kit.run_spec(ExperimentSpec(jobs=[TINY], name="r", slurm={"queue": "gpu"}), out=tmp_path)
    assert not (tmp_path / "refused").exists()


def test_registering_something_that_is_not_an_executor_is_refused():
    with pytest.raises(BadInput, match="a subclass of colloc_kit.pipeline.executors.Executor"):
        executors.register(dict)


def test_an_atomic_write_on_a_full_disk_names_the_file_keeps_the_old_one_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "status.json"
    atomic.write_json(path, {"cells": ["a", "b"]})
    temp = tmp_path / f".{path.name}.{os.getpid()}.tmp"
    temp.symlink_to("/dev/full")  # the temp file's every write fails with ENOSPC
    atomic.write_json(path, {"cells": ["c"]})  # fits in the file's own blocks: written there
    assert json.loads(path.read_text()) == {"cells": ["c"]}
    temp.symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left on device") as raised:
        atomic.write_json(path, {"cells": ["x" * 100_000]})
    assert raised.value.filename == str(path)
    assert json.loads(path.read_text()) == {"cells": ["c"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    new = tmp_path / "new.json"
    (tmp_path / f".{new.name}.{os.getpid()}.tmp").symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left on device"):
        atomic.write_json(new, {"a": 1})
    assert not new.exists() and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_two_commands_in_one_second_keep_a_machine_description_each(tmp_path, monkeypatch):
    """A fast machine ran two commands on one folder within a second (test_cells' rerun, CI of session 40): the
    second's description replaced the first's, whose runs then named the second's file."""
    monkeypatch.setattr(time, "strftime", lambda fmt, *when: "20261201-034959")
    folder = ExperimentFolder.of(tmp_path, "exp")
    first, second = (folder.write_machine({"host": {"hostname": "vm"}, "command": n}) for n in (1, 2))
    assert [json.loads(path.read_text())["command"] for path in (first, second)] == [1, 2]
    assert sorted(p.name for p in first.parent.iterdir()) == ["vm-20261201-034959-1.json", "vm-20261201-034959.json"]
    assert folder.write_machine({"host": {"hostname": "vm"}, "command": 3}, tag="123").name == "vm-123.json"


def test_every_json_file_of_the_kit_is_written_through_the_atomic_write():
    by_hand = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py") if p.name != "atomic.py"
               for n, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"os\.replace\(|\.replace\(path\)|write_text\(json\.dumps|json\.dump\(", line)]
    assert not by_hand, f"write these through colloc_kit.atomic: {by_hand}"


LISTED_EXECUTOR = '''
"""An executor of an installed package, with options of its own: it records what it was given and runs nothing."""
from dataclasses import dataclass

from colloc_kit.pipeline.executors import Executor, FinishedCell


@dataclass(frozen=True)
class CoreOptions:
    cores: list[int] | None = None
    queue: str = "short"


class ListedExecutor(Executor):
    name = "listed"
    Options = CoreOptions
    given = []

    def _submit(self, cells, spec_file):
        type(self).given.append(self.options)
        return [FinishedCell(cell, "failed") for cell in cells]
'''


@pytest.fixture
def installed_executor(tmp_path, monkeypatch):
    """lab_executor.py and a dist-info declaring it as the entry point `listed` of colloc_kit.executors, on sys.path
    as an installed package would be."""
    (tmp_path / "lab_executor.py").write_text(LISTED_EXECUTOR)
    info = tmp_path / "lab_executor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-executor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[colloc_kit.executors]\nlisted = lab_executor:ListedExecutor\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    executors._REGISTRY.pop("listed", None)
    sys.modules.pop("lab_executor", None)


def test_an_installed_executor_takes_typed_options_from_the_specs_executor_key(installed_executor):
    assert "listed" in executors.names() and "listed" not in executors._REGISTRY  # declared, loaded on first use
    spec_file = installed_executor / "spec.yaml"
    spec_file.write_text("name: listed\nmonitor: false\njobs: [{model: smallcnn, device: cpu}]\n"
                         "executor: {name: listed, cores: [2, 4]}\n")
    colloc_kit.run_spec(ExperimentSpec.from_yaml(spec_file), out=installed_executor / "runs", progress=False)
    given = sys.modules["lab_executor"].ListedExecutor.given
    assert [(options.cores, options.queue) for options in given] == [([2, 4], "short")]
    spec_file.write_text(spec_file.read_text().replace("[2, 4]", "[2, x]"))
    with pytest.raises(BadInput, match=r"listed: cores must be a list of positive whole numbers, got \[2, 'x'\]"):
        colloc_kit.run_spec(ExperimentSpec.from_yaml(spec_file), out=installed_executor / "runs", progress=False)
    assert len(given) == 1


def test_the_executor_key_names_an_executor_and_excludes_slurm_and_gpus():
    with pytest.raises(BadInput, match="executor is {name: <executor>, <option>: ...} \\(no slurm, no gpus\\)"):
        executors.chosen(ExperimentSpec(jobs=[TINY], executor={"name": "here"}, gpus=[0]))
    with pytest.raises(BadInput, match="executor 'nowhere' is not known"):
        executors.chosen(ExperimentSpec(jobs=[TINY], executor={"name": "nowhere"}))
    assert executors.chosen(ExperimentSpec(jobs=[TINY], executor={"name": "slurm", "time_min": 5})) == (
        executors.SlurmExecutor, {"time_min": 5})

"""The manifest as a typed record: written and read back whole, old manifests still read, broken ones named, and no
other module that knows its keys."""

import ast
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import colloc_kit
from colloc_kit.errors import BrokenRun
from colloc_kit.statuses import Status
from colloc_kit.store.manifest import (
    FORMAT,
    MANIFEST,
    HostCpu,
    JobEntry,
    JobOutcome,
    MachineRef,
    Manifest,
    ModeRecord,
    MonitorSettings,
    SlotRecord,
    read,
    write,
)

PACKAGE = Path(colloc_kit.__file__).parent
# a real run of a tiny CPU job, made by the kit at commit b96d848 (before cells: no cell_id, runner_pid or host_cpu,
# and `machine` holds the whole machine description), events and manifest as that version wrote them
OLD_RUNS = Path(__file__).parent / "data" / "kit-b96d848"
SPEC = {"model": "smallcnn", "dataset": "synthetic", "batch_size": 64, "amp": "off", "device": "cpu"}
KEYS_WRITTEN = ["format", "run_id", "experiment", "cell_id", "status", "started_at", "ended_at", "mode", "copies",
                "repeat", "sequential", "spec", "gpu", "runner_pid", "runner_started_at", "slurm_job_id", "machine",
                "host_cpu", "mode_state", "problems", "monitor", "jobs"]  # written since cells, in this order


def full_manifest() -> Manifest:
    """A manifest with every field set, as a finished run of two jobs has it."""
    outcome = JobOutcome("j0-smallcnn", Status.FAILED, error_kind="out_of_memory", error="CUDA out of memory",
                         exit_code=1, released_at=100.5, ended_at=160.25, pid=4242, mode_problem="MPS server fault")
    return Manifest(
        run_id="20260101-120000-mps-x2-r0", experiment="demo", cell_id="mps-x2-r0-0123456789",
        status=Status.FAILED_JOBS, started_at=99.0, ended_at=161.0,
        mode=ModeRecord("mps", {"thread_percentage": 50}, "mps-50"), copies=2, repeat=0, sequential=False,
        spec={"name": "demo", "gpu": 0}, gpu=0, runner_pid=1234, slurm_job_id="77_3",
        machine=MachineRef(hostname="node1", gpu_name="NVIDIA H100 80GB HBM3", gpu_uuid="GPU-1",
                           description="../machines/node1-20260101-120000.json"),
        host_cpu=HostCpu(cores=[0, 1, 2, 3], cpu_s=12.5), mode_state={"daemon": {"fault": None}},
        problems=["an MPS server fault"], monitor=MonitorSettings(enabled=True, interval_s=0.15),
        jobs=[JobEntry("j0-smallcnn", group=0, spec=SPEC, slot=SlotRecord("mps-0", {"thread_percentage": 50}),
                       outcome=outcome),
              JobEntry("j1-smallcnn", group=0, spec=SPEC)])


def test_a_manifest_written_reads_back_equal_with_the_keys_the_kit_has_always_written(tmp_path):
    manifest = full_manifest()
    write(tmp_path / MANIFEST, manifest)
    assert read(tmp_path / MANIFEST) == manifest
    on_disk = json.loads((tmp_path / MANIFEST).read_text())
    assert list(on_disk) == KEYS_WRITTEN and on_disk["format"] == FORMAT
    assert on_disk["status"] == "failed_jobs" and on_disk["jobs"][0]["outcome"]["status"] == "failed"
    assert list(on_disk["jobs"][0]) == ["job", "group", "spec", "slot", "outcome"]
    assert on_disk["jobs"][1]["slot"] is None and on_disk["jobs"][1]["outcome"] is None
    assert "mode_problem" in on_disk["jobs"][0]["outcome"]  # written only where a mode saw a problem
    full, unset = on_disk["jobs"][0]["outcome"], JobOutcome("j1", Status.COMPLETE).to_dict()
    assert list(unset) == [k for k in full if k != "mode_problem"]
    assert on_disk["machine"]["description"] == "../machines/node1-20260101-120000.json"
    assert on_disk["host_cpu"] == {"cores": [0, 1, 2, 3], "cpu_s": 12.5}


def test_a_manifest_of_an_older_kit_reads_with_defaults_and_its_machine_named(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(OLD_RUNS, runs)
    (path,) = runs.rglob(MANIFEST)
    before = json.loads(path.read_text())
    assert "cell_id" not in before and "host" in before["machine"]  # the old shape
    manifest = read(path)
    assert manifest.status == Status.COMPLETE and manifest.mode.name == "naive" and manifest.copies == 1
    assert manifest.cell_id is None and manifest.runner_pid is None and manifest.host_cpu == HostCpu()
    assert manifest.machine.hostname == before["machine"]["host"]["hostname"] and manifest.machine.gpu_name is None
    assert manifest.machine.description is None
    (entry,) = manifest.jobs
    assert entry.outcome.status == Status.COMPLETE and entry.outcome.pid == before["jobs"][0]["outcome"]["pid"]
    assert entry.slot == SlotRecord("naive-0", {}) and entry.spec == before["jobs"][0]["spec"]

    results = colloc_kit.load(runs)
    assert not results.broken and list(results.runs["status"]) == ["complete"]
    assert list(results.runs["host"]) == [manifest.machine.hostname]
    assert list(results.jobs["status"]) == ["complete"] and (results.jobs["images_per_s"] > 0).all()

    write(path, replace(manifest, status=Status.INTERRUPTED))  # rewritten: the old description is kept
    after = json.loads(path.read_text())
    assert after["machine"]["host"] == before["machine"]["host"] and after["machine"]["gpus"] == []
    assert read(path).machine.hostname == manifest.machine.hostname and read(path).status == "interrupted"


def test_a_missing_optional_key_gets_its_default_and_an_unknown_key_is_kept(tmp_path):
    data = {"mode": {"name": "naive", "colour": "blue"}, "future_key": {"x": 1},
            "jobs": [{"job": "j0", "spec": {**SPEC, "new_knob": 3}, "note": "kept",
                      "outcome": {"status": "complete", "gpu_seconds": 9.5}}]}
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    manifest = read(tmp_path / MANIFEST)
    assert manifest.status == Status.RUNNING and manifest.problems == [] and manifest.sequential is False
    assert manifest.machine == MachineRef() and manifest.monitor == MonitorSettings() and manifest.gpu is None
    assert manifest.extra == {"future_key": {"x": 1}} and manifest.mode.extra == {"colour": "blue"}
    (entry,) = manifest.jobs
    assert entry.group is None and entry.slot is None and entry.extra == {"note": "kept"}
    assert entry.outcome.job_id == "j0" and entry.outcome.extra == {"gpu_seconds": 9.5}

    write(tmp_path / MANIFEST, replace(manifest, status=Status.COMPLETE))
    on_disk = json.loads((tmp_path / MANIFEST).read_text())
    assert on_disk["future_key"] == {"x": 1} and on_disk["mode"]["colour"] == "blue"
    assert on_disk["jobs"][0]["note"] == "kept" and on_disk["jobs"][0]["spec"]["new_knob"] == 3
    assert on_disk["jobs"][0]["outcome"]["gpu_seconds"] == 9.5
    assert read(tmp_path / MANIFEST) == replace(manifest, status=Status.COMPLETE)


@pytest.mark.parametrize("data, says", [
    ({"mode": {"name": "naive"}, "jobs": {"j0": {}}}, "no job list (jobs)"),
    ({"mode": {"name": "naive"}, "jobs": [{"job": "j0", "spec": SPEC, "outcome": {"status": "won"}}]},
     "jobs[0] has an outcome without a known status"),
    ({"mode": {"name": "naive"}, "jobs": [{"job": "j0", "spec": SPEC, "slot": "gpu0"}]},
     "jobs[0] has a slot that is not an object"),
    ({"mode": {"name": "naive"}, "jobs": [], "machine": ["node1"]}, "a field of the wrong type"),
    ({"mode": {"name": "naive"}, "jobs": [], "host_cpu": [0, 1]}, "a field of the wrong type"),
    ({"mode": {"name": "naive"}, "jobs": [{"job": "j0", "spec": SPEC, "outcome": {"status": "complete", "pid": 1,
                                                                                   "job_id": "j0", "bogus": 1}}],
      "monitor": "on"}, "a field of the wrong type"),
])
def test_a_broken_manifest_is_named_with_what_is_wrong(tmp_path, data, says):
    path = tmp_path / "run" / MANIFEST
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    with pytest.raises(BrokenRun) as raised:
        read(path)
    assert str(raised.value).startswith(f"{path} is not a colloc-kit run manifest: ") and says in str(raised.value)
    assert list(colloc_kit.load(tmp_path).broken) == [str(path.parent)]


def test_a_status_outside_the_table_is_refused_when_the_record_is_built():
    with pytest.raises(ValueError, match="exploded"):
        replace(full_manifest(), status="exploded")
    with pytest.raises(ValueError, match="won"):
        JobOutcome("j0", "won")
    assert replace(full_manifest(), status="complete").status is Status.COMPLETE


def test_no_module_but_the_manifest_knows_its_keys():
    """Keys found only in the manifest (not in a frame or a spec): any other module naming one reads or writes the
    JSON by hand."""
    only_manifest = {"runner_pid", "mode_state", "host_cpu", "slurm_job_id", "format"}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "manifest.py":
            continue
        strings = {node.value for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not strings & only_manifest, f"{path.relative_to(PACKAGE)} names {strings & only_manifest}"

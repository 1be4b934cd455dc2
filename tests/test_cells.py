"""Cells, resume and the dispatcher over several GPUs, on the CPU.

The GPUs here are STAND-INS: the MIG simulator (colloc_kit/gpu/mig_simulator.py) plays an NVML with two simulated
H100s, so the kit chooses, names and pins GPUs as on a real host, while the jobs (smallcnn) train on the CPU in real
worker processes. One cell per stand-in GPU runs at a time, each in its own real process with its own cores.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pandas as pd
import psutil
import pytest
from fake_results import fake_results, job_rows
from processes import kit_processes_below_us, survivors_of_killed_kit

import colloc_kit
from colloc_kit.cli.main import main
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import SimulatedNvml
from colloc_kit.modes import make_mode
from colloc_kit.analysis.lone import with_baselines
from colloc_kit.analysis.results import combine
from colloc_kit.pipeline import estimate
from colloc_kit.pipeline.cells import cells
from colloc_kit.pipeline.entry import _visible_gpu
from colloc_kit.pipeline.executors import dispatcher
from colloc_kit.pipeline.executors.gpus import kept_lanes
from colloc_kit.pipeline.progress import GpuBoard
from colloc_kit.pipeline.status import experiment_status
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import find_runs

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=0, warmup_steps=2, interval_s=0.1,
            synthetic_samples=64, steps=12)


@pytest.fixture
def two_stand_in_gpus():
    """An NVML with two simulated H100s (stand-ins: nothing here runs on a GPU)."""
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)) as sim:
        yield sim


def two_gpu_kit_training(out, preamble: str = "") -> subprocess.Popen:
    """A kit in its own process (after `preamble`, Python lines) running a 1-copy and a 2-copy cell of 100,000 steps
    on two stand-in GPUs into `out`, returned once both cells' jobs train."""
    script = preamble + (
        "import colloc_kit\n"
        "from colloc_kit.gpu import nvml\n"
        "from colloc_kit.gpu.mig_simulator import SimulatedNvml\n"
        "with nvml.use_backend(SimulatedNvml('H100-80GB', gpus=2)):  # stand-in GPUs\n"
        f"    colloc_kit.run([{ {**TINY, 'steps': 100000}!r}], mode='naive', copies=[1, 2], out={str(out)!r},\n"
        "                   monitor=False, progress=False, gpus=[0, 1])\n")
    kit = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len([p for p in out.rglob("*.events.jsonl") if '"interval"' in p.read_text()]) < 2:
        assert time.monotonic() < deadline and kit.poll() is None, kit.stderr.read()
        time.sleep(0.1)
    return kit


def manifests(path):
    return [run.read_manifest() for run in find_runs(path)]


def test_cell_ids_are_stable_interleaved_and_change_with_the_jobs():
    spec = ExperimentSpec(jobs=[JobSpec(**TINY)], modes=[ModeSpec("naive"), ModeSpec("exclusive")], copies=[1, 2],
                          repeats=2)
    ids = [c.cell_id for c in cells(spec)]
    assert ids == [c.cell_id for c in cells(ExperimentSpec.from_mapping(spec.to_dict()))]  # the same spec, read back
    assert len(set(ids)) == 8 and [c.repeat for c in cells(spec)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert ids[0].startswith("naive-x1-r0-") and ids[-1].startswith("exclusive-x2-r1-")
    changed = ExperimentSpec(jobs=[JobSpec(**{**TINY, "steps": 13})], modes=spec.modes, copies=[1, 2], repeats=2)
    assert not set(ids) & {c.cell_id for c in cells(changed)}


@pytest.mark.slow
def test_rerun_skips_complete_cells_and_runs_the_missing_ones(tmp_path, capsys):
    first = colloc_kit.run([TINY], mode="naive", copies=[1, 2], out=tmp_path, monitor=False, progress=False)
    assert list(first.runs["status"]) == ["complete", "complete"]
    capsys.readouterr()
    again = colloc_kit.run([TINY], mode="naive", copies=[1, 2], repeats=2, out=tmp_path, monitor=False,
                           progress=False)
    said = capsys.readouterr().out  # a notice, not an error
    assert "2 cell(s) already complete" in said and "naive-x1-r0, naive-x2-r0" in said
    assert len(find_runs(tmp_path)) == 4  # only the repeat-1 cells ran
    assert list(again.runs["repeat"]) == [0, 0, 1, 1] and set(again.runs["status"]) == {"complete"}
    assert set(again.runs["run_id"][:2]) == set(first.runs["run_id"])  # the earlier runs, read from the folder
    machines = list((tmp_path / "experiment" / "machines").glob("*.json"))
    assert len(machines) == 2  # described once per command, not once per run


@pytest.mark.slow
def test_failed_and_killed_cells_run_again(tmp_path):
    failing = {**TINY, "steps": 30, "fail_at_step": 3, "fail_kind": "crash"}
    colloc_kit.run([failing], mode="naive", out=tmp_path, monitor=False, progress=False)
    (failed,) = find_runs(tmp_path)
    assert failed.read_manifest().status == "failed_jobs"
    colloc_kit.run([failing], mode="naive", out=tmp_path, monitor=False, progress=False)
    assert len(find_runs(tmp_path)) == 2, "a failed cell runs again"

    colloc_kit.run([TINY], mode="naive", out=tmp_path / "k", monitor=False, progress=False)
    (run,) = find_runs(tmp_path / "k")
    cell_id = run.read_manifest().cell_id
    run.update_manifest(status="running", runner_pid=os.getpid())  # as while another command runs it
    assert ExperimentFolder(tmp_path / "k" / "experiment").cell_states()[cell_id].status == "running"
    colloc_kit.run([TINY], mode="naive", out=tmp_path / "k", monitor=False, progress=False)
    assert len(find_runs(tmp_path / "k")) == 1, "a cell another live process runs is left to it"
    run.update_manifest(status="running", runner_pid=2**22 + 12345)  # as a kit killed mid-run leaves it
    assert ExperimentFolder(tmp_path / "k" / "experiment").cell_states()[cell_id].status == "interrupted"
    colloc_kit.run([TINY], mode="naive", out=tmp_path / "k", monitor=False, progress=False)
    assert [m.status for m in manifests(tmp_path / "k")] == ["running", "complete"]


def test_plain_modes_pin_jobs_to_their_gpu_by_uuid(tmp_path, two_stand_in_gpus):
    with make_mode(ModeSpec("naive"), workdir=tmp_path, gpu=1, device="cuda") as mode:
        (slot,) = mode.slots(1)
    assert slot.env["CUDA_VISIBLE_DEVICES"] == nvml.device_uuid(1) != nvml.device_uuid(0)
    assert slot.env["CUDA_VISIBLE_DEVICES"].startswith("GPU-")


@pytest.mark.slow
def test_dispatcher_spreads_cells_one_per_gpu_at_a_time_and_resumes(tmp_path, two_stand_in_gpus, capsys):
    results = colloc_kit.run([TINY], mode=["naive", "exclusive"], copies=[1, 2], out=tmp_path, monitor=False,
                             progress=False, gpus=[0, 1])
    runs = results.runs
    assert len(runs) == 4 and set(runs["status"]) == {"complete"}
    assert set(runs["gpu"]) == {0, 1} and runs["gpu_name"].isna().all()  # CPU jobs: the stand-in GPU's slot
    assert runs["host"].notna().all() and (runs["host_cpu_s"] > 0).all()
    found = manifests(tmp_path)
    spans = {gpu: sorted((m.started_at, m.ended_at) for m in found if m.gpu == gpu) for gpu in (0, 1)}
    for gpu, cell_spans in spans.items():
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(cell_spans, cell_spans[1:])), \
            f"two cells at once on GPU {gpu}"
    assert any(s0 < e1 and s1 < e0 for s0, e0 in spans[0] for s1, e1 in spans[1]), "the GPUs ran side by side"
    cores = {m.gpu: tuple(m.host_cpu.cores) for m in found}
    if len(psutil.Process().cpu_affinity()) >= 2:
        assert not set(cores[0]) & set(cores[1]), "each GPU's cells have cores of their own"

    capsys.readouterr()
    again = colloc_kit.run([TINY], mode=["naive", "exclusive"], copies=[1, 2], out=tmp_path, monitor=False,
                           progress=False, gpus=[1, 0])
    assert "4 cell(s) already complete" in capsys.readouterr().out
    assert len(find_runs(tmp_path)) == 4 and list(again.runs["run_id"]) == list(runs["run_id"])


@pytest.mark.slow
def test_interrupting_the_dispatcher_stops_every_gpus_cell(tmp_path, two_stand_in_gpus):
    endless = {**TINY, "steps": 100000}

    def interrupt_when_both_gpus_train():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            streams = list(tmp_path.rglob("*.events.jsonl"))
            if len([p for p in streams if '"interval"' in p.read_text()]) >= 2:
                break
            time.sleep(0.1)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt_when_both_gpus_train, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        colloc_kit.run([endless], mode="naive", copies=[1, 2], out=tmp_path, monitor=False, progress=False,
                       gpus=[0, 1])
    found = manifests(tmp_path)
    assert sorted(m.gpu for m in found) == [0, 1]
    assert {m.status for m in found} == {"interrupted"}
    assert {j.outcome.status for m in found for j in m.jobs} == {"interrupted"}
    assert kit_processes_below_us() == [], "no cell process or worker is left"
    assert {r["status"] for r in experiment_status(tmp_path / "experiment")} == {"failed"}


@pytest.mark.slow
@pytest.mark.parametrize("kept", [False, True], ids=["one experiment", "lanes kept across experiments"])
def test_an_error_that_ends_the_dispatcher_stops_every_lane_and_its_workers(tmp_path, two_stand_in_gpus, monkeypatch,
                                                                            kept):
    """Not only an interrupt: whatever ends the dispatcher's loop (a bug, a test's timeout) stops its lanes, which
    would otherwise train on, unseen, for as long as the dispatcher's process lives (a notebook's kernel); also where
    the lanes are kept for a next experiment (`kept_lanes`, as `run seed-NN` runs), and the error comes out of waiting
    on the cells' handles."""
    def heard_then_failed(lane, codes, board):
        if len([p for p in tmp_path.rglob("*.events.jsonl") if '"interval"' in p.read_text()]) >= 2:
            raise RuntimeError("the dispatcher failed")
        return heard(lane, codes, board)

    heard = dispatcher._heard
    monkeypatch.setattr(dispatcher, "_heard", heard_then_failed)
    with pytest.raises(RuntimeError, match="the dispatcher failed"), kept_lanes() if kept else contextlib.nullcontext():
        colloc_kit.run([{**TINY, "steps": 100000}], mode="naive", copies=[1, 2], out=tmp_path, monitor=False,
                       progress=False, gpus=[0, 1])
    left = kit_processes_below_us()
    for proc in left:  # ours: ended before the assertion, so that they cannot starve the tests after this one
        proc.kill()
    assert left == [], "lanes or workers left training"
    found = manifests(tmp_path)
    assert sorted(m.gpu for m in found) == [0, 1] and {m.status for m in found} == {"interrupted"}


@pytest.mark.slow
def test_lanes_stop_on_their_dispatchers_interrupt_also_where_sigint_was_ignored(tmp_path):
    """A kit started in the background of a script inherits SIGINT ignored, and its lanes would inherit that from it;
    stopped by SIGTERM, it passes the interrupt on to its lanes as SIGINT, which they must hear: each stops its jobs and
    marks its run interrupted, rather than being killed after the dispatcher's wait."""
    kit = two_gpu_kit_training(tmp_path, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)  # as a "
                                         "shell starts a command with &\n")
    kit.terminate()
    assert kit.wait(timeout=240) != 0
    kit.stderr.close()
    found = manifests(tmp_path)
    assert len(found) == 2 and {m.status for m in found} == {"interrupted"}, "a lane was killed, not interrupted"
    assert {j.outcome.status for m in found for j in m.jobs} == {"interrupted"}


@pytest.mark.parametrize("argv, message", [
    (["--gpus", "7"], "GPU 7 does not exist; this machine has 2 GPU(s), numbered 0, 1"),
    (["--gpus", "0,1,0"], "gpus lists a GPU twice"),
    (["--gpus", "0", "--slurm"], "give gpus or slurm, not both"),
    (["--time-min", "5"], "--time-min is a Slurm option; add --slurm"),
])
def test_bad_gpu_and_slurm_input_exits_2_before_anything_starts(tmp_path, capsys, two_stand_in_gpus, argv, message):
    code = main(["run", "--model", "smallcnn", "--device", "cpu", "--out", str(tmp_path), *argv])
    assert code == 2 and message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_slurm_without_submitit_exits_2_with_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # as where the extra is not installed
    code = main(["run", "--model", "smallcnn", "--device", "cpu", "--slurm", "--out", str(tmp_path)])
    assert code == 2 and "pip install 'colloc-kit[slurm]'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_status_lists_done_failed_and_pending_cells(tmp_path, capsys):
    colloc_kit.run([TINY], mode="naive", copies=[1], out=tmp_path, monitor=False, progress=False)
    spec_file = next((tmp_path / "experiment" / "specs").glob("*.json"))
    spec = json.loads(spec_file.read_text())
    spec["copies"] = [1, 2]  # a wider matrix written into the same folder, not yet run
    (spec_file.parent / "wider.json").write_text(json.dumps(spec))
    assert main(["status", str(tmp_path / "experiment")]) == 0
    out = capsys.readouterr().out
    assert "naive-x1-r0-" in out and "done" in out and "naive-x2-r0-" in out and "pending" in out
    assert "1 done, 1 pending" in out
    assert main(["status", str(tmp_path / "nothing")]) == 2


@pytest.mark.parametrize("env, expected", [
    ({}, 0), ({"CUDA_VISIBLE_DEVICES": "1"}, 1), ({"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"}, 1),
    ({"SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "0"}, 1),  # a device cgroup renumbers CUDA's view, not Slurm's
])
def test_a_slurm_task_finds_the_gpu_it_was_given(monkeypatch, env, expected):
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    machine_info = {"gpus": [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]}
    assert _visible_gpu(machine_info, default=0) == expected


@pytest.mark.slow
def test_a_killed_dispatcher_takes_its_cells_and_their_workers_with_it(tmp_path):
    """SIGKILL of the kit (no chance to clean up): each cell process is told by the kernel (SIGTERM), stops its jobs
    and marks its run interrupted; no process is left."""
    kit = two_gpu_kit_training(tmp_path)
    below = psutil.Process(kit.pid).children(recursive=True)
    assert len(below) >= 4  # two cell processes and their workers
    alive = survivors_of_killed_kit(kit, below, timeout=120)
    kit.stderr.close()
    assert alive == [], f"left running after the kit was killed: {alive}"
    found = manifests(tmp_path)
    assert len(found) == 2 and {m.status for m in found} == {"interrupted"}
    assert {j.outcome.status for m in found for j in m.jobs} == {"interrupted"}


def test_plan_estimates_the_wall_time_from_the_lanes_measured_in_the_folder(tmp_path, capsys):
    """--plan with nothing measured says so; with runs in the folder it estimates from each cell's lane time (start
    to the next start on its GPU), over the lanes the spec names; the lanes take the next cell as they free up, longer
    cells first within a repeat, so the last minutes are not one GPU's."""
    spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=5)], copies=[1, 3], repeats=2,
                          name="est", gpus=[0, 1])
    assert estimate.plan_line(spec, tmp_path).startswith("time: no cells of these jobs measured")
    runs = pd.DataFrame({"mode_label": ["naive"] * 4, "copies": [1, 3, 1, 3], "gpu": [0, 0, 1, 1],
                         "status": ["complete"] * 4, "started_at": [0.0, 10.0, 0.0, 30.0],
                         "ended_at": [9.0, 40.0, 29.0, 60.0]})
    per_cell = estimate.lane_times(runs)
    assert per_cell == {("naive", 1, False): 20.0, ("naive", 3, False): 30.0}
    todo = cells(spec)
    assert [c.copies for c in dispatcher.dispatch_order(todo)] == [3, 1, 3, 1]
    assert estimate.wall_s(todo, 1, per_cell) == 100.0
    assert estimate.wall_s(todo, 2, per_cell) == 50.0  # 30 + 20 on each lane: no lane runs on alone
    assert estimate.wall_s(todo, 2, {}) is None


def test_a_cell_queued_again_while_queued_shares_its_run_and_one_that_ended_runs_again(tmp_path):
    """Two experiments that queue the same cell (a shared lone baseline) on one dispatcher run it once, both handles
    waiting for that run; queued again after it ended, it runs again, its earlier end not counted as this one's."""
    spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=5)], copies=[1, 2], gpus=[0, 1])
    first, second = cells(spec)
    lanes = dispatcher.Dispatcher([SimpleNamespace(gpu=0)], [None], GpuBoard(["GPU 0"], enabled=False))
    machine = tmp_path / "machine.json"
    folder = ExperimentFolder.of(tmp_path, "x")
    one = lanes.add([first, second], tmp_path / "spec.json", folder, False, machine)
    other = lanes.add([first], tmp_path / "other.json", folder, False, machine)
    assert [cell.cell_id for cell, _ in lanes.todo] == [second.cell_id, first.cell_id]  # dispatch order: x2 first
    assert lanes.todo[1][1]["spec"] == str(tmp_path / "spec.json"), "run as the experiment that queued it first"
    assert [h.cell.cell_id for h in one + other] == [first.cell_id, second.cell_id, first.cell_id]
    assert lanes.board.bar.total == 2, "counted once"
    lanes.todo.clear()
    lanes.codes[first.cell_id] = 0  # as a lane says when the cell ended
    assert lanes.idle() and other[0].result() == "complete"
    again = lanes.add([first], tmp_path / "spec.json", folder, False, machine)
    assert again[0].cell.cell_id not in lanes.codes and [c.cell_id for c, _ in lanes.todo] == [first.cell_id]


def test_plan_times_a_warm_launchs_later_windows_by_their_own_lane_times():
    """With warm repeats a series' first cell is its launch's first window, the next ones later windows: each timed by
    the lane times measured for its kind of window, or, where that kind was not measured, the other kind's."""
    spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=5)], repeats=3, warm_repeats=True,
                          name="warm", gpus=[0])
    per_cell = {("naive", 1, False): 20.0, ("naive", 1, True): 5.0}
    assert estimate.wall_s(cells(spec), 1, per_cell, warm=True) == 30.0  # a launch: 20 s, then 5 s a window
    assert estimate.wall_s(cells(spec), 1, per_cell) == 60.0  # cold repeats: each its own launch
    assert estimate.wall_s(cells(spec), 1, {("naive", 1, False): 20.0}, warm=True) == 60.0
    runs = pd.DataFrame({"mode_label": ["naive"] * 3, "copies": [1] * 3, "gpu": [0] * 3, "status": ["complete"] * 3,
                         "started_at": [0.0, 20.0, 26.0], "ended_at": [19.0, 25.0, 30.0], "warm_window": [0, 1, 2]})
    assert estimate.lane_times(runs) == {("naive", 1, False): 20.0, ("naive", 1, True): 5.0}
    assert "naive x1 20 s (5 s a later window)" in estimate.per_cell_text(estimate.lane_times(runs))


def test_a_job_with_cudnn_autotune_off_is_another_workload_whose_baseline_never_mixes_with_the_studys():
    """cudnn_autotune is part of the workload: a lone job without the study's autotuning is its own baseline, and a
    frame from before the key (none given) counts as the study's."""
    study = job_rows("r1", "naive", 1, [100.0]) + job_rows("r2", "naive", 2, [60.0, 60.0])
    off = [{**row, "run_id": row["run_id"] + "-off", "cudnn_autotune": "off", "images_per_s": row["images_per_s"] * 2,
            "images_per_s_overlap": row["images_per_s_overlap"] and row["images_per_s_overlap"] * 2} for row in study]
    jobs = with_baselines(pd.DataFrame([*study, *off]))
    base = jobs.groupby(jobs["cudnn_autotune"].fillna("study"))["baseline_images_per_s"].unique()
    assert list(base["study"]) == [100.0] and list(base["off"]) == [200.0]
    assert set(jobs["relative_throughput"].dropna()) == {1.0, 0.6}
    assert set(with_baselines(pd.DataFrame(study))["cudnn_autotune"]) == {"study"}


def test_results_put_together_from_frames_with_and_without_the_workload_keys_still_find_their_baselines():
    """A panel adds each run's Results to those it has (`results.combine`): the derived frames carry `workers` and
    `cudnn_autotune`, a later run's frame from the hand-made or older kit's rows lacks them; its jobs still match
    the lone job measured earlier (an empty key is the study's autotuning, empty workers match empty workers)."""
    lone = combine([fake_results(job_rows("r1", "naive", 1, [100.0]))])
    both = combine([lone, fake_results(job_rows("r2", "naive", 2, [75.0, 75.0]))])
    assert list(both.jobs["baseline_images_per_s"]) == [100.0, 100.0, 100.0]
    assert list(both.jobs["relative_throughput"]) == [1.0, 0.75, 0.75]
    assert set(both.jobs["cudnn_autotune"]) == {"study"}


def test_a_run_in_several_results_counts_once_as_the_last_one_has_it():
    """A re-run's Results hold the earlier runs of its experiment too (the panel combines each with what it has)."""
    first = fake_results(job_rows("r1", "naive", 1, [100.0]))
    again = fake_results(job_rows("r1", "naive", 1, [100.0]) + job_rows("r2", "naive", 1, [90.0]))
    both = combine([first, again])
    assert list(both.jobs["run_id"]) == ["r1", "r2"] and list(both.runs["run_id"]) == ["r1", "r2"]

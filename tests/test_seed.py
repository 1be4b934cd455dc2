"""The seed study's matrix (experiments/seed.py), its recipe on real files, and `colloc-kit run seed-NN --plan`."""

from __future__ import annotations

import os
import time

import pandas as pd
import pytest

import colloc_kit
from colloc_kit.cli import plans
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput
from colloc_kit.experiments import seed as study
from colloc_kit.experiments import seed_run
from colloc_kit.spec import JobSpec
from colloc_kit.spec.yaml_files import bundled_specs, read_yaml
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.worker.recipes import seed_transform
from colloc_kit.worker.standin import LABEL, make

H100 = study.Card.planned("H100-80GB")


def test_experiment_33_has_the_artifacts_thirteen_workloads_per_model_and_precision():
    rows = pd.DataFrame(study.plan_rows(study.SeedSpec(33, amp=["off", "bf16"]), H100))
    assert len(rows) == 3 * 13 * 2 and rows["runs"].all()
    r26 = rows[(rows["workload"] == "resnet26 on cifar10, batch 128") & (rows["amp"] == "off")]
    assert list(r26["artifact"]) == ["1 x exclusive", "1 x 7g.40gb", "1 x 4g.20gb", "1 x MPS", "2 x naive",
                                     "2 x 3g.20gb", "2 x MPS", "3 x naive", "3 x 2g.10gb", "3 x MPS", "7 x naive",
                                     "7 x 1g.5gb", "7 x MPS"]
    assert "MPS partition (not MIG): 7 x 1g" in set(r26["runs_as"])
    assert r26[r26["artifact"] == "2 x 3g.20gb"]["mig_layout_here"].item() == "3g.40gb@0 + 3g.40gb@4"


def test_experiment_37_names_the_mig_mixes_that_need_more_than_seven_slices():
    rows = pd.DataFrame(study.plan_rows(study.SeedSpec(37), H100))
    cannot = rows[~rows["runs"]]
    assert list(cannot["workload"]) == ["R152 + R50 as 1+2", "R152 + R50 + R26 as 1+1+2", "R152 + R50 + R26 as 1+1+3"]
    assert all("compute slices; H100-80GB has 7" in text for text in cannot["mig_layout_here"])
    assert rows.iloc[0]["runs_as"] == "exclusive"  # the gains' baselines: each model alone


def test_experiment_37s_mixes_share_one_warm_lone_cell_per_job_and_workers():
    """Each mix's three baselines run its jobs alone: one cell per distinct job (seed aside), shared by every mix with
    it (the dispatcher runs a cell queued twice once), so the lone cells are 18 series on an H200, not 135 sequential
    cells of 441 jobs (issue 52, session 35); each runs one job, so its repeats are warm."""
    from colloc_kit.pipeline.cells import cells  # noqa: PLC0415 - this test only

    specs = study.experiments(study.SeedSpec(37, warm_repeats=True, feed_swaps=True), study.Card.planned("H200-141GB"))
    planned = {c.cell_id: c for spec in specs for c in cells(spec) if c.repeat < spec.repeats}
    lone = [c for c in planned.values() if c.mode.name == "exclusive"]
    assert all(len(c.jobs or spec.jobs) == 1 for spec in specs for c in cells(spec) if c.mode.name == "exclusive")
    assert len(lone) == 18 * 3 and len({c.series for c in lone}) == 18
    workers = {(c.jobs[0].model, c.jobs[0].workers) for c in lone if c.baseline == "host-matched"}
    assert workers == {(m, w) for m in ("timm.resnet152", "timm.resnet50", "timm.resnet26") for w in (8, 12, 16, 20)}
    assert {c.jobs[0].seed for c in lone if c.jobs} == {0}
    pair = next(s for s in specs if len(s.jobs) == 2 and s.jobs[0].model == "timm.resnet26")
    assert sorted(c.label for c in cells(pair) if c.repeat == 0 and c.mode.name == "exclusive") == [
        "gpu-only-resnet26-exclusive-x1-r0", "gpu-only-resnet50-exclusive-x1-r0",
        "host-matched-w8-resnet26-exclusive-x1-r0", "host-matched-w8-resnet50-exclusive-x1-r0",
        "resnet26-exclusive-x1-r0", "resnet50-exclusive-x1-r0"]
    alone = next(s for s in specs if s.jobs == [pair.jobs[0]])  # R26's lone experiment: the mix's configured cells
    assert alone.modes[0].name == "exclusive" and len(cells(alone)) > 6  # and their precision repeats
    assert {c.cell_id for c in cells(alone)} <= {c.cell_id for c in cells(pair)}


def test_experiments_share_one_folder_and_run_lone_cells_first():
    specs = study.experiments(study.SeedSpec(33, data_root="/d", seconds=5), H100)
    assert {s.name for s in specs} == {"seed-33"}
    first = specs[0]
    assert first.copies == [1] and first.modes[0].name == "exclusive"
    job = first.jobs[0]
    assert (job.model, job.recipe, job.image_size, job.workers, job.pin_memory, job.data_root) == (
        "timm.resnet26", "seed", 224, 4, False, "/d/cifar10")
    assert sum(len(s.modes) for s in specs) == 39


def test_mig_rows_run_as_mig_where_mig_is_enabled():
    card = study.Card(H100.model, mig_enabled=True, memory_mib=81559)
    modes = [m for s in study.experiments(study.SeedSpec(33), card) for m in s.modes]
    assert {"name": "mig", "layout": ["1g.10gb"] * 7} in [{"name": m.name, **m.options} for m in modes]


@pytest.mark.parametrize("mapping, words", [({"seed": 32}, "33, 34, 35, 36 and 37"),
                                            ({"seed": 33, "amp": ["fp8"]}, "amp"),
                                            ({"seed": 33, "copies": 3}, "unknown key(s) copies")])
def test_bad_seed_specs_are_refused(mapping, words):
    with pytest.raises(BadInput, match=words.replace("(", r"\(").replace(")", r"\)")):
        study.SeedSpec.from_mapping(mapping)


def test_bundled_seed_specs_read_as_seed_specs():
    for n in (33, 34, 35, 36, 37):
        seed = study.SeedSpec.from_mapping(read_yaml(f"seed-{n}"))
        assert seed.seed == n and "off" in seed.amp
    assert {f"seed-{n}" for n in range(33, 38)} <= set(bundled_specs())


def test_plan_needs_no_gpu(capsys):
    assert main(["run", "seed-37", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "MPS partition (not MIG)" in out and "3 cannot be placed" in out


def test_the_plan_says_where_its_cells_would_run_on_a_machine_without_that_gpu(capsys, monkeypatch):
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))
    assert main(["run", "seed-33", "--plan"]) == 0
    assert "78 cells (78 would run on H100-80GB, 0 cannot be placed)" in capsys.readouterr().out


def test_the_plan_names_what_it_cannot_read_in_the_folder(capsys, monkeypatch, tmp_path):
    """Before: "no runs here yet" for a folder of torn manifests, a file in its place or an unreadable one; the plan
    of a YAML spec named them (issue 53)."""
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))
    torn = tmp_path / "torn" / "seed-33" / "20261128-115325-exclusive-x1-r0"
    torn.mkdir(parents=True)
    (torn / "manifest.json").write_text('{"format": "colloc-kit-run/1", "run_')
    (tmp_path / "file").mkdir()
    (tmp_path / "file" / "seed-33").write_text("not a folder")
    (tmp_path / "locked" / "seed-33").mkdir(parents=True)
    readable = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: "locked" not in str(path) and readable(path, mode))
    for out, says in [("torn", f"{torn / 'manifest.json'} cannot be read as JSON"),
                      ("file", f"{tmp_path / 'file' / 'seed-33'} is a file, not the experiment's folder"),
                      ("locked", f"{tmp_path / 'locked' / 'seed-33'} cannot be read (no permission")]:
        assert main(["run", "seed-33", "--plan", "--out", str(tmp_path / out)]) == 0
        assert f"colloc-kit: warning: {says}" in capsys.readouterr().err


def test_the_plan_says_whether_every_cell_fits_a_budget_before_anything_starts(capsys, monkeypatch):
    """--budget-min counts the study's cells, its baselines' cells and every precision repeat they may need: 55.2
    minutes planned for experiment 33 fp32 on one H100 from the built-in cell times (19 s a launch's first window,
    11.3 s a warm repeat's later one), 158.6 with every precision repeat (up to 16 runs of each baseline, 8 of each
    collocated cell); over two GPUs half of that."""
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))
    assert main(["run", "seed-33", "--amp", "off", "--plan", "--budget-min", "20"]) == 0
    out = capsys.readouterr().out
    assert ("261 cells (144 of them baselines'), up to 330 precision repeats while a baseline or a cell misses its "
            "target") in out
    assert "budget 20 min: does not fit (55.2 min planned, 158.6 at most)" in out
    assert main(["run", "seed-33", "--amp", "off", "--gpus", "0,1", "--plan", "--budget-min", "45"]) == 0
    assert "budget 45 min: fits unless every precision repeat is needed (27.6 min planned, 79.3 at most)" in \
        capsys.readouterr().out
    assert main(["run", "seed-33", "--amp", "off", "--repeats", "1", "--plan", "--budget-min", "120"]) == 0
    assert "budget 120 min: fits" in capsys.readouterr().out
    assert main(["run", "seed-33", "--budget-min", "20"]) == 2
    assert "give it with --plan" in capsys.readouterr().err


def test_the_plan_leaves_out_the_cells_that_the_lone_runs_here_say_cannot_fit(capsys, monkeypatch, tmp_path):
    """Before: --plan counted the cells `run` refuses as not fitting (session 29: ResNet-152's x7 cells and their
    baselines' on two H200s), so a complete experiment planned 2.3 more minutes and a call ran none. Here the lone
    runs of the renewed H100 set say which of experiment 33's fp32 cells cannot fit an H100's 80 GB."""
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))
    (tmp_path / "seed-33").mkdir()
    args = ["run", "seed-33", "--amp", "off", "--data-root", "/tmp/seed-data", "--out", str(tmp_path), "--plan"]
    assert main(args) == 0
    assert "261 cells (144 of them baselines')" in capsys.readouterr().out  # no lone runs here: every cell counted
    renewed = colloc_kit.reference.load("h100-80gb-renewed")
    monkeypatch.setattr(plans, "load", lambda path: renewed)  # its lone runs, as if they had run in this folder
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "192 cells (105 of them baselines')" in out  # 69 fewer: the three repeats of each mode left out, and
    # its baselines' cells no mode that fits shares
    said = out.split("not counted, as the run leaves them out (the lone runs here say they cannot fit):\n")[1]
    left_out = [line for line in said.splitlines() if line.startswith("  ")]
    assert len(left_out) == 10 and "  naive x7 of timm.resnet50 (7 jobs need 98,112 MiB" in said
    assert "  mps(partitions=2g+2g+2g) x3 of timm.resnet152 (a 2g partition holds 20,389 MiB" in said


def test_a_fresh_plan_on_a_card_with_a_shipped_set_estimates_from_that_sets_runs(capsys, monkeypatch, tmp_path):
    """Before: with no runs in its folder, the plan of seed-33 fp32 on two H200s said 27.6 minutes planned and "does
    not fit" 20, from the built-in cell time of an H100 and 10-s windows; the run took 18.6 (issue 50, session 32).
    On a machine with that card, a fresh folder's plan now takes its lane times from the shipped set named by the card
    (`h200-141gb`); without the card here, from the built-in times as before."""
    h200 = {"index": 0, "name": "NVIDIA H200", "memory_mb": 143771, "mig_mode": {"current": False}}
    args = ["run", "seed-33", "--amp", "off", "--gpus", "0,1", "--out", str(tmp_path), "--plan", "--budget-min", "20"]
    monkeypatch.setattr(study, "gpu_list", lambda: ([h200, {**h200, "index": 1}], None))
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "lane times of 251 run(s) of the shipped set h200-141gb, measured on this card" in out
    assert "budget 20 min: fits unless every precision repeat is needed (18.8 min planned, 38.3 at most)" in out
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))
    assert main(args) == 0
    assert "no runs here yet" in capsys.readouterr().out


def test_a_data_root_without_the_studys_folders_is_refused_saying_how_to_make_them(tmp_path, capsys):
    """`run seed-33` once named ImageNet for a missing CIFAR-10 folder, and neither `data make` nor --data-root."""
    (tmp_path / "cifar10").mkdir()
    assert main(["run", "seed-33", "--data-root", str(tmp_path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert f"under the data root {tmp_path}, which has no imagenet64/, imagenet/" in err
    assert f"colloc-kit data make imagenet64 --root {tmp_path}; colloc-kit data make imagenet --root {tmp_path}" in err
    assert "give --data-root the folder" in err and "image-net.org" not in err


def test_seed_refuses_flags_that_change_the_study(capsys):
    assert main(["run", "seed-33", "--model", "resnet18", "--plan"]) == 2
    assert "--model" in capsys.readouterr().err


def test_the_recipe_fills_its_defaults_but_keeps_what_the_job_says():
    job = JobSpec.from_mapping({"model": "resnet26", "recipe": "seed", "workers": 2})
    assert (job.image_size, job.workers, job.pin_memory) == (224, 2, False)
    with pytest.raises(BadInput, match="recipe must be one of kit, seed"):
        JobSpec(model="resnet26", recipe="timm")


def test_seed_transform_yields_224_uint8_images_from_a_small_png(tmp_path):
    import numpy as np  # noqa: PLC0415 - heavy: this test only
    import torch  # noqa: PLC0415 - heavy: this test only
    from PIL import Image  # noqa: PLC0415 - heavy: this test only

    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    out = seed_transform(224)(image)
    assert out.shape == (3, 224, 224) and out.dtype == torch.uint8


def test_the_seed_recipe_without_timm_is_refused_before_anything_starts(tmp_path, monkeypatch, capsys):
    import importlib.util  # noqa: PLC0415 - this test only

    folder = make("cifar10", tmp_path / "data", images=20, progress=False)
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else found(name, *a))
    code = main(["run", "--model", "smallcnn", "--device", "cpu", "--recipe", "seed", "--dataset", "imagefolder",
                 "--data-root", str(folder), "--steps", "2", "--out", str(tmp_path / "runs")])
    assert code == 2 and "the seed recipe (timm's own training transform) needs timm" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_seed_recipe_job_trains_on_stand_in_files_through_the_real_loader(tmp_path):
    folder = make("cifar10", tmp_path / "data", images=200, progress=False)
    results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "recipe": "seed", "dataset": "imagefolder",
                               "data_root": str(folder), "batch_size": 8, "steps": 3, "warmup_steps": 1,
                               "workers": 1}], out=tmp_path / "runs", progress=False)
    job = results.jobs.iloc[0]
    assert job["status"] == "complete" and job["recipe"] == "seed" and job["image_size"] == 224
    assert job["dataset_label"].startswith(LABEL)


def test_cells_the_lone_runs_say_cannot_fit_are_named_with_their_arithmetic():
    lone = pd.DataFrame([{"model": "timm.resnet50", "data_root": "/d/imagenet64", "batch_size": 128, "amp": "off",
                          "baseline_steady_gpu_memory_mb": 14016.0}])
    specs = {(s.jobs[0].model, s.copies[0]): s for s in study.experiments(study.SeedSpec(33, data_root="/d"), H100)}
    def does_not_fit(spec, mode):
        return seed_run._does_not_fit(seed_run._lone_footprints(lone, spec), mode, H100)

    why = {(copies, mode.label): does_not_fit(specs["timm.resnet50", copies], mode)
           for copies in (3, 7) for mode in specs["timm.resnet50", copies].modes}
    assert why[7, "naive"].startswith("7 jobs need 98,112 MiB") and "81,559 MiB" in why[7, "naive"]
    assert why[7, "mps(partitions=1g+1g+1g+1g+1g+1g+1g)"].startswith("a 1g partition holds")
    assert why[3, "naive"] is None and why[3, "mps(partitions=2g+2g+2g)"] is None
    assert does_not_fit(specs["timm.resnet26", 7], specs["timm.resnet26", 7].modes[0]) is None


def test_a_seed_run_without_its_data_is_refused_before_any_cell_starts(tmp_path, capsys):
    assert main(["run", "seed-33", "--data-root", str(tmp_path / "none"), "--out", str(tmp_path / "runs")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_an_ended_experiment_is_read_back_while_the_lanes_run_the_next_ones_cells(tmp_path, monkeypatch, capsys):
    """Reading an ended experiment back takes seconds (a resumed run's complete ones held its first cell 33.5 s,
    issue 50); meanwhile the lanes are driven on: another experiment's cells start while it reads. Real CPU cells on
    two stand-in GPUs (the simulated NVML); the first experiment's read made 5 s slower, and a cell handed to a lane
    during it (started over a second into it) shows the lanes were driven meanwhile. The command's wall time is kept
    in the folder and said at its end."""
    from colloc_kit.gpu import nvml  # noqa: PLC0415 - this test only
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415
    from colloc_kit.pipeline.spec_run import SpecRun  # noqa: PLC0415
    from colloc_kit.spec import ExperimentSpec  # noqa: PLC0415
    from colloc_kit.store.rundir import find_runs  # noqa: PLC0415

    def spec(batch, repeats):
        job = {"model": "smallcnn", "device": "cpu", "batch_size": batch, "image_size": 32, "workers": 0,
               "warmup_steps": 2, "interval_s": 0.1, "synthetic_samples": 64, "steps": 12}
        return ExperimentSpec.from_mapping({"name": "seed-33", "jobs": [job], "copies": [1], "gpus": [0, 1],
                                            "modes": ["exclusive"], "repeats": repeats, "monitor": False,
                                            "baselines": []})

    read, spans = SpecRun.read, []

    def slow_read(self):
        started = time.time()
        if self.spec.jobs[0].batch_size == 8:
            time.sleep(5)
        spans.append((self.spec.jobs[0].batch_size, started, time.time()))
        return read(self)

    monkeypatch.setattr(SpecRun, "read", slow_read)
    monkeypatch.setattr(seed_run, "experiments", lambda seed, card: [spec(8, 1), spec(16, 8)])
    started = time.time()
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        results = seed_run.run(study.SeedSpec(33, data_root=str(tmp_path)), out=str(tmp_path / "runs"),
                               progress=False)
    assert len(results.runs) == 9 and set(results.runs["status"]) == {"complete"}
    (command,) = ExperimentFolder.of(tmp_path / "runs", "seed-33").commands()  # the kit's own clock, kept
    assert command["ended"] == "complete" and command["measured"] == 9
    assert started <= command["started_at"] < command["ended_at"] <= time.time()
    minutes, seconds = divmod(round(command["wall_s"]), 60)
    ((_, read_from, read_to),) = [span for span in spans if span[0] == 8]
    others = [run.read_manifest().started_at for run in find_runs(tmp_path / "runs" / "seed-33")
              if run.read_manifest().jobs[0].spec["batch_size"] == 16]
    assert any(read_from + 1 < started < read_to for started in others), "no cell started while one was read"
    assert f"9 cells measured in {minutes} min {seconds} s" in capsys.readouterr().out


def test_an_interrupted_seed_run_keeps_its_wall_time_marked_interrupted(tmp_path, monkeypatch):
    """A seed run stopped by Ctrl-C (a lent machine's call ends so) still keeps its command's wall time, marked
    interrupted, beside those of the commands before it: a resumed experiment's time is their sum."""
    from colloc_kit.gpu import nvml  # noqa: PLC0415 - this test only
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415
    from colloc_kit.pipeline.spec_run import SpecRun  # noqa: PLC0415
    from colloc_kit.spec import ExperimentSpec  # noqa: PLC0415

    job = {"model": "smallcnn", "device": "cpu", "batch_size": 8, "image_size": 32, "workers": 0, "warmup_steps": 2,
           "interval_s": 0.1, "synthetic_samples": 64, "steps": 6}
    spec = ExperimentSpec.from_mapping({"name": "seed-33", "jobs": [job], "copies": [1], "gpus": [0],
                                        "modes": ["exclusive"], "monitor": False, "baselines": []})

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(seed_run, "experiments", lambda seed, card: [spec])
    folder = ExperimentFolder.of(tmp_path / "runs", "seed-33")
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=1)):
        seed_run.run(study.SeedSpec(33, data_root=str(tmp_path)), out=str(tmp_path / "runs"), progress=False)
        monkeypatch.setattr(SpecRun, "read", interrupted)
        with pytest.raises(KeyboardInterrupt):
            seed_run.run(study.SeedSpec(33, data_root=str(tmp_path)), out=str(tmp_path / "runs"), progress=False)
    first, second = folder.commands()
    assert (first["ended"], first["measured"], second["ended"], second["measured"]) == (
        "complete", 1, "interrupted", 0)
    assert first["ended_at"] <= second["started_at"] and second["wall_s"] >= 0


def test_a_seed_run_interrupted_mid_experiment_counts_the_cells_it_ran(tmp_path, monkeypatch):
    """Stopped during an experiment's third cell (on one GPU an experiment's cells run before its handles return),
    the command's record says it measured the two cells before it, not only those of experiments that had ended
    (session 36's experiment 37 said 86 for 204)."""
    from colloc_kit.gpu import nvml  # noqa: PLC0415 - this test only
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415
    from colloc_kit.pipeline import lane  # noqa: PLC0415
    from colloc_kit.spec import ExperimentSpec  # noqa: PLC0415

    job = {"model": "smallcnn", "device": "cpu", "batch_size": 8, "image_size": 32, "workers": 0, "warmup_steps": 2,
           "interval_s": 0.1, "synthetic_samples": 64, "steps": 6}
    spec = ExperimentSpec.from_mapping({"name": "seed-33", "jobs": [job], "copies": [1], "gpus": [0], "repeats": 3,
                                        "modes": ["exclusive"], "monitor": False, "baselines": []})
    started, run_read_later = [], lane.run_read_later

    def third_interrupted(*args, **kwargs):
        started.append(1)
        if len(started) == 3:
            raise KeyboardInterrupt
        return run_read_later(*args, **kwargs)

    monkeypatch.setattr(seed_run, "experiments", lambda seed, card: [spec])
    monkeypatch.setattr(lane, "run_read_later", third_interrupted)
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=1)), pytest.raises(KeyboardInterrupt):
        seed_run.run(study.SeedSpec(33, data_root=str(tmp_path)), out=str(tmp_path / "runs"), progress=False)
    (command,) = ExperimentFolder.of(tmp_path / "runs", "seed-33").commands()
    assert (command["ended"], command["measured"]) == ("interrupted", 2)


@pytest.mark.slow
def test_two_mixes_measure_their_shared_lone_cells_once_warm_and_each_is_split_against_them(tmp_path, monkeypatch,
                                                                                             capsys):
    """Mixes A+B and A+A+B (experiment 37's shape) share A's and B's lone cells: the configured ones their own lone
    experiments ran, the host-matched ones (no loader workers here: w0 for both mixes) queued by both mixes and
    measured once per repeat; each a cell of one job, so its launch is kept for its next repeat (a warm window), and
    both mixes are split against them. Real CPU cells on two stand-in GPUs (the simulated NVML)."""
    from colloc_kit.analysis import summaries  # noqa: PLC0415 - this test only
    from colloc_kit.gpu import nvml  # noqa: PLC0415
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415
    from colloc_kit.spec import ExperimentSpec  # noqa: PLC0415
    from colloc_kit.store.rundir import find_runs  # noqa: PLC0415

    def job(batch, seed=0):
        return {"model": "smallcnn", "device": "cpu", "batch_size": batch, "image_size": 32, "workers": 0, "seed": seed,
                "warmup_steps": 2, "interval_s": 0.1, "synthetic_samples": 64, "steps": 12}

    def spec(jobs, mode):
        return ExperimentSpec.from_mapping({"name": "seed-37", "jobs": jobs, "copies": [1], "gpus": [0, 1],
                                            "modes": [mode], "repeats": 2, "monitor": False, "warm_repeats": True,
                                            "baselines": ["configured", "host-matched"]})

    specs = [spec([job(8)], "exclusive"), spec([job(16)], "exclusive"), spec([job(8), job(16, 1)], "naive"),
             spec([job(8, 1), job(8, 2), job(16, 3)], "naive")]
    monkeypatch.setattr(seed_run, "experiments", lambda seed, card: specs)
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        results = seed_run.run(study.SeedSpec(37, data_root=str(tmp_path)), out=str(tmp_path / "runs"),
                               progress=False)
    assert "seed-37: 12 cells measured" in capsys.readouterr().out  # 2 x (2 lone, 2 host-matched, 2 mixes)
    manifests = [run.read_manifest() for run in find_runs(tmp_path / "runs" / "seed-37")]
    assert len(manifests) == 12 and {m.status for m in manifests} == {"complete"}
    lone = [m for m in manifests if m.copies == 1 and len(m.jobs) == 1]
    assert sorted((m.cell_id.startswith("host-matched"), m.jobs[0].spec["batch_size"]) for m in lone) == [
        (False, 8), (False, 8), (False, 16), (False, 16), (True, 8), (True, 8), (True, 16), (True, 16)]
    assert all(m.warm is not None for m in lone), "a lone cell of one job keeps its launch for its next repeat"
    runs = summaries.run_summary(results)
    mixes = runs[runs["mode"] == "naive"]
    assert len(mixes) == 4 and mixes["gpu_part"].notna().all() and mixes["host_part"].notna().all()


@pytest.mark.slow
def test_the_seed_experiments_share_the_lanes_and_wait_only_for_their_lone_runs(tmp_path, monkeypatch, capsys):
    """Over several GPUs an experiment's cells queue behind the last one's, so a lane does not wait at an
    experiment's end for the slowest (issue 55); an experiment of copies starts only once its jobs' lone runs
    ended (its fit check reads them). Real CPU cells on two stand-in GPUs (the simulated NVML)."""
    from colloc_kit.gpu import nvml  # noqa: PLC0415 - this test only
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415
    from colloc_kit.spec import ExperimentSpec  # noqa: PLC0415
    from colloc_kit.store.rundir import find_runs  # noqa: PLC0415

    def spec(batch, copies, modes, repeats=1):
        job = {"model": "smallcnn", "device": "cpu", "batch_size": batch, "image_size": 32, "workers": 0,
               "warmup_steps": 2, "interval_s": 0.1, "synthetic_samples": 64, "steps": 12}
        return ExperimentSpec.from_mapping({"name": "seed-33", "jobs": [job], "copies": [copies], "gpus": [0, 1],
                                            "modes": modes, "repeats": repeats, "monitor": False, "baselines": []})

    # three lone cells over two lanes: one lane is free a whole cell before the last lone run ends (four, two a lane,
    # ended within milliseconds of each other, and which lane took the next experiment first was a race)
    specs = [spec(8, 1, ["exclusive"], repeats=3), spec(8, 2, ["naive"]), spec(16, 1, ["exclusive"])]
    monkeypatch.setattr(seed_run, "experiments", lambda seed, card: specs)
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        results = seed_run.run(study.SeedSpec(33, data_root=str(tmp_path)), out=str(tmp_path / "runs"),
                               progress=False)
    assert set(results.runs["status"]) == {"complete"} and len(results.runs) == 5
    assert "seed-33: 5 cells measured" in capsys.readouterr().out
    spans: dict = {}  # (batch size, copies) -> [(started, ended)] of its runs
    for run in find_runs(tmp_path / "runs" / "seed-33"):
        manifest = run.read_manifest()
        spans.setdefault((manifest.jobs[0].spec["batch_size"], manifest.copies), []).append(
            (manifest.started_at, manifest.ended_at))
    lone, copies, other = spans[8, 1], spans[8, 2], spans[16, 1]
    assert min(s for s, _ in copies) >= max(e for _, e in lone), "copies started before their lone runs ended"
    assert min(s for s, _ in other) < max(e for _, e in lone), "the next experiment waited for the last one's end"

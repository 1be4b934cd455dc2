"""The scaling benchmark's passes across device calls (benchmarks/scaling/scaling.py run,
benchmarks/scaling/scaling_passes.py): a recorded pass is read, not run again; a pass cut short (its folder without
pass.json) or recorded with other settings or on another card is refused with exit 2 before anything starts; a pass
whose estimate does not fit --budget-s is not started."""

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks" / "scaling"
SETTINGS = {"seconds": 3.0, "warmup_steps": 10, "repeats": 3, "cudnn_autotune": "study", "tiny": False,
            "images": 10_000, "per_lane": 8, "card": "NVIDIA H100 80GB HBM3"}


@pytest.fixture(scope="module")
def bench():
    """benchmarks/scaling/scaling.py and scaling_passes.py, imported as the benchmark imports its siblings."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        yield importlib.import_module("scaling"), importlib.import_module("scaling_passes")
    for name in ("scaling", "scaling_passes", "cell_phases"):
        sys.modules.pop(name, None)


def _record(out: Path, gpus: int, wall_s: float, **settings) -> Path:
    folder = out / f"gpus-{gpus}"
    folder.mkdir(parents=True)
    (folder / "pass.json").write_text(json.dumps({"gpus": gpus, "wall_s": wall_s, "t0": 0.0, "t1": wall_s,
                                                  "machine": "2 x H100", "settings": {**SETTINGS, **settings}}))
    return folder


def test_recorded_passes_are_read_by_their_gpus(bench, tmp_path):
    _, passes = bench
    _record(tmp_path, 1, 480.0)
    _record(tmp_path, 2, 250.0)
    found = passes.recorded_passes(tmp_path, SETTINGS)
    assert sorted(found) == [1, 2] and found[2]["wall_s"] == 250.0


def test_a_pass_cut_short_is_refused_with_what_to_do(bench, tmp_path, capsys):
    _, passes = bench
    _record(tmp_path, 1, 480.0)
    (tmp_path / "gpus-2" / "seed-r26").mkdir(parents=True)  # cells measured, the pass never ended
    with pytest.raises(SystemExit) as stopped:
        passes.recorded_passes(tmp_path, SETTINGS)
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "gpus-2 has no pass.json" in said and "remove that folder" in said


@pytest.mark.parametrize("other", [{"seconds": 5.0}, {"card": "NVIDIA H200"}, {"per_lane": 16}])
def test_a_pass_recorded_otherwise_is_refused(bench, tmp_path, capsys, other):
    _, passes = bench
    _record(tmp_path, 1, 480.0, **other)
    with pytest.raises(SystemExit) as stopped:
        passes.recorded_passes(tmp_path, SETTINGS)
    assert stopped.value.code == 2
    assert f"measured with {other}" in capsys.readouterr().err


def test_the_estimate_uses_the_measured_overhead_once_a_pass_has_one(bench, tmp_path):
    _, passes = bench
    done = passes.Passes(tmp_path, [])
    assert done.estimate(36, 1, 3.0)[0] == pytest.approx(36 * (3.0 + passes.ASSUMED_OVERHEAD_S))
    done.lanes = [{"gpus": 1, "overhead_per_cell_s": 6.0}, {"gpus": 2, "overhead_per_cell_s": 7.0},
                  {"gpus": 2, "overhead_per_cell_s": 9.0}]  # the largest pass median: 8 s
    estimate, how = done.estimate(36, 4, 3.0)
    assert estimate == pytest.approx(9 * 11.0) and "measured" in how
    assert done.estimate(35, 2, 3.0)[0] == pytest.approx(18 * 11.0)  # a lane runs whole cells


def test_a_pass_that_does_not_fit_the_budget_is_not_started(bench, tmp_path, capsys):
    scaling, _ = bench
    assert scaling.main(["run", "--out", str(tmp_path), "--tiny", "--passes", "1", "--budget-s", "30"]) == 0
    said = capsys.readouterr().out
    assert "the 1-GPU pass not started" in said and "--passes 1" in said
    assert not (tmp_path / "gpus-1").exists()


def test_a_cut_short_pass_stops_the_command_before_anything_runs(bench, tmp_path):
    scaling, _ = bench
    (tmp_path / "gpus-1").mkdir()
    with pytest.raises(SystemExit) as stopped:
        scaling.main(["run", "--out", str(tmp_path), "--tiny", "--passes", "1,2"])
    assert stopped.value.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpus-1"]  # no pass run, no table written


@pytest.mark.slow
def test_lane_gaps_reads_each_lanes_runs_and_its_busy_share(tmp_path, capsys):
    """benchmarks/scaling/lane_gaps.py on real CPU runs over two stand-in GPUs: each lane's runs counted within the
    call's span, busy no more than the span, every run on one lane or the other."""
    import colloc_kit  # noqa: PLC0415 - this test only
    from colloc_kit.gpu import nvml  # noqa: PLC0415
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415

    job = {"model": "smallcnn", "device": "cpu", "batch_size": 8, "image_size": 32, "workers": 0, "warmup_steps": 2,
           "interval_s": 0.1, "synthetic_samples": 64, "steps": 12}
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        results = colloc_kit.run([job], mode="naive", copies=[1, 2], repeats=2, out=tmp_path, name="lanes",
                                 monitor=False, progress=False, gpus="all")
    begin, end = results.runs["started_at"].min() - 1, results.runs["ended_at"].max() + 1
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        lane_gaps = importlib.import_module("lane_gaps")
        assert lane_gaps.main([str(tmp_path / "lanes"), "--calls", f"{begin}-{end}"]) == 0
    for name in ("lane_gaps", "cell_phases"):
        sys.modules.pop(name, None)
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 |")]
    assert sorted(int(row[2]) for row in rows) == [0, 1] and sum(int(row[3]) for row in rows) == 4
    assert all(0 < float(row[5]) <= 1 for row in rows)

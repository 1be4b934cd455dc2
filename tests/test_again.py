"""A re-run measures again or says plainly that it measured nothing (`again=`, the reuse notice)."""

import pytest

import colloc_kit
from colloc_kit.errors import BadInput
from colloc_kit.notebook import setup as notebook
from colloc_kit.pipeline import Tally
from colloc_kit.pipeline.api import experiment_spec
from colloc_kit.store.rundir import find_runs

TINY = {"model": "smallcnn", "device": "cpu", "dataset": "synthetic", "batch_size": 8, "image_size": 32,
        "synthetic_samples": 64, "steps": 12, "warmup_steps": 2, "workers": 0}


@pytest.mark.slow
def test_again_adds_a_repeat_and_a_plain_rerun_says_it_measured_nothing(tmp_path, capsys):
    colloc_kit.run([TINY], out=tmp_path, monitor=False, progress=False)
    colloc_kit.run([TINY], out=tmp_path, monitor=False, progress=False)
    out, err = capsys.readouterr()
    assert "reused the run of " in out and "(nothing measured)" in out and "FRESH = True" in out
    assert "already complete" not in err and len(find_runs(tmp_path)) == 1
    again = colloc_kit.run([TINY], out=tmp_path, monitor=False, progress=False, again=True)
    assert len(find_runs(tmp_path)) == 2 and list(again.runs["repeat"]) == [0, 1]
    assert "reused" not in capsys.readouterr().out


@pytest.mark.slow
def test_again_over_two_gpus_measures_a_new_repeat_of_every_cell(tmp_path):
    """The lane processes of several GPUs find a new repeat that `again` numbers past the spec's repeats (before,
    each lane died on its id and the call returned the old runs, nothing said). Stand-in GPUs (the simulated NVML)."""
    from colloc_kit.gpu import nvml  # noqa: PLC0415 - this test only
    from colloc_kit.gpu.mig_simulator import SimulatedNvml  # noqa: PLC0415

    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        colloc_kit.run([TINY], copies=[1, 2], gpus=[0, 1], out=tmp_path, monitor=False, progress=False)
        again = colloc_kit.run([TINY], copies=[1, 2], gpus=[0, 1], out=tmp_path, monitor=False, progress=False,
                               again=True)
    assert sorted(again.runs["repeat"]) == [0, 0, 1, 1] and set(again.runs["status"]) == {"complete"}
    assert len(find_runs(tmp_path)) == 4


def test_a_sweeps_bad_copies_are_refused_before_its_baseline_runs(tmp_path):
    with pytest.raises(BadInput, match="copies must be whole numbers of at least 1"):
        colloc_kit.sweep([TINY], ["naive"], copies=[0, 2], out=tmp_path, monitor=False, progress=False)
    assert find_runs(tmp_path) == []


def test_a_notebooks_parameters_are_named_as_written_in_its_cell():
    with pytest.raises(BadInput, match=r"unknown model 'resnt18' \(did you mean 'resnet18'\?\)"):
        notebook.check_parameters("auto", ["resnt18"])
    with pytest.raises(BadInput, match=r'DEVICE = "gpu"|DEVICE = \'gpu\''):
        notebook.check_parameters("gpu", ["resnet18"])
    with pytest.raises(BadInput, match=r"COPIES = \[0, 2\]"):
        notebook.check_parameters("auto", ["resnet18"], copies=[0, 2])


@pytest.mark.slow
def test_one_commands_experiments_sharing_a_cell_say_once_what_was_measured_and_reused(tmp_path, capsys):
    """The seed study's experiments share their lone cells: the second experiment finding the first's lone cell
    complete is not a re-run, so no notice; the closing line counts it as shared. The same command again reuses all."""
    first = experiment_spec([TINY], "naive", [1], name="study", monitor=False)
    second = experiment_spec([TINY], "naive", [1, 2], name="study", monitor=False)

    def command() -> str:
        tally = Tally()
        for spec in (first, second):
            colloc_kit.run_spec(spec, out=tmp_path, progress=False, tally=tally)
        return tally.line("study", 61.4)

    assert command() == ("colloc-kit: study: 2 cells measured in 1 min 1 s, 1 of them shared by later experiments "
                         "(measured once, reused); nothing reused from an earlier command.")
    again = command()
    assert again.startswith("colloc-kit: study: 0 cells measured in 1 min 1 s; 2 cells reused, complete from an "
                            "earlier command (latest ") and again.endswith("give another --out or --name.")
    assert "reused the run of" not in capsys.readouterr().out and len(find_runs(tmp_path)) == 2

"""Specs refuse bad input with messages that say what to do, and round-trip to worker arguments."""

import argparse

import pytest

from colloc_kit.errors import BadInput
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec


@pytest.mark.parametrize("changes, message", [
    ({"batch_size": -4}, "batch_size must be a positive integer"),
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"amp": "fp8"}, "amp must be one of off, bf16, fp16"),
    ({"device": "tpu"}, "device must be cuda or cpu"),
    ({"steps": 10, "epochs": 1}, "at most one budget"),
])
def test_bad_job_fields_are_refused(changes, message):
    with pytest.raises(BadInput, match=message):
        JobSpec(model="resnet18", **changes)


def test_argv_round_trip():
    job = JobSpec(model="resnet50", batch_size=128, steps=300, amp="bf16", channels_last=True, pin_memory=False)
    parser = argparse.ArgumentParser()
    JobSpec.add_arguments(parser, require_model=True)
    assert JobSpec.from_namespace(parser.parse_args(job.to_argv())) == job


def test_unknown_yaml_keys_are_listed(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("jobs:\n  - model: resnet18\n    batchsize: 64\n")
    with pytest.raises(BadInput, match=r"jobs\[0\]: unknown key\(s\) batchsize; valid keys: .*batch_size"):
        ExperimentSpec.from_yaml(path)
    path.write_text("jobs: [{model: resnet18}]\ncopise: [1, 2]\n")
    with pytest.raises(BadInput, match=r"unknown key\(s\) copise"):
        ExperimentSpec.from_yaml(path)


def test_malformed_yaml_is_refused(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("jobs: [model: resnet18\n")
    with pytest.raises(BadInput, match="not valid YAML"):
        ExperimentSpec.from_yaml(path)


def test_unknown_mode_is_refused():
    with pytest.raises(BadInput, match="unknown sharing mode 'timeslice'; choose one of .*naive"):
        ExperimentSpec(jobs=[JobSpec(model="resnet18")], modes=[ModeSpec("timeslice")])


def test_runs_cover_modes_copies_and_repeats():
    spec = ExperimentSpec.from_mapping({"jobs": [{"model": "resnet18"}], "modes": ["exclusive", "naive"],
                                        "copies": [1, 2, 4], "repeats": 2})
    runs = spec.runs()
    assert len(runs) == 12
    assert {(m.name, c) for m, c, _ in runs} == {(m, c) for m in ("exclusive", "naive") for c in (1, 2, 4)}
    assert [r for _, _, r in runs] == [0] * 6 + [1] * 6


def test_mode_label_names_its_options():
    assert ModeSpec.parse({"name": "mps", "partitions": ["3g", "1g"]}).label == "mps(partitions=3g+1g)"


def test_an_unquoted_off_in_yaml_means_off(tmp_path):
    """YAML reads `amp: off` (and `cudnn_autotune: off`) as false: before, refused as "amp must be a name, got
    False" (issue 53); the choice it names is off."""
    spec = tmp_path / "s.yaml"
    spec.write_text("jobs:\n  - {model: smallcnn, device: cpu, amp: off, cudnn_autotune: off}\n")
    job = ExperimentSpec.from_yaml(spec).jobs[0]
    assert (job.amp, job.cudnn_autotune) == ("off", "off")


def test_copies_that_are_not_whole_numbers_are_refused_with_an_example():
    with pytest.raises(BadInput, match=r"whole number of copies .* such as \[1, 2, 4\]; got 1.5"):
        ExperimentSpec.from_mapping({"jobs": [{"model": "smallcnn"}], "copies": 1.5})
    with pytest.raises(BadInput, match=r"whole numbers of at least 1, such as \[1, 2, 4\]; got \[1, 2.5\]"):
        ExperimentSpec.from_mapping({"jobs": [{"model": "smallcnn"}], "copies": [1, 2.5]})  # before: "integers"


def test_a_mode_named_twice_is_refused_before_anything_runs():
    """Before: `run --mode naive,naive` ran the cells once and said the second listing was "left to another kit"."""
    with pytest.raises(BadInput, match="modes lists naive more than once; name each mode once"):
        ExperimentSpec.from_mapping({"jobs": [{"model": "smallcnn"}], "modes": ["naive", "naive"]})

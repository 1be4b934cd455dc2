"""`colloc-kit mig plan|propose|show`: placements, exit 2 with the explanation, read-only show."""

import argparse

import pytest

from colloc_kit.cli.main import main
from colloc_kit.cli.mig import add_subcommands
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import simulated_gpu
from colloc_kit.modes import make_mode
from colloc_kit.spec import ModeSpec


def run(*argv):
    parser = argparse.ArgumentParser(prog="colloc-kit")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.handler(args)


def test_plan_prints_placements(capsys):
    assert run("mig", "plan", "3g.40gb,2g.20gb,1g.10gb,1g.10gb", "--gpu", "H100-80GB") == 0
    out = capsys.readouterr().out
    assert "7/7 compute slices, 8/8 memory slices" in out
    assert "3g.40gb     start 4 size 4  [....####]" in out
    assert "1g.10gb     start 3 size 1  [...#....]" in out


def test_impossible_plan_exits_2_with_the_explanation(capsys):
    assert run("mig", "plan", "4g,4g", "--gpu", "A100-40GB") == 2
    err = capsys.readouterr().err
    assert "needs 8 compute slices; A100-40GB has 7" in err and "Valid layouts close to it: 4g.20gb,3g.20gb" in err
    assert run("mig", "plan", "2g", "--gpu", "V100") == 2
    assert "built-in MIG tables" in capsys.readouterr().err


def test_plan_without_a_gpu_model_uses_this_machine_s_gpu(capsys):
    with nvml.use_backend(simulated_gpu("A30")):
        assert run("mig", "plan", "2g,1g,1g") == 0
    assert "MIG layout on NVIDIA A30 (simulated) (live)" in capsys.readouterr().out


def test_propose(capsys):
    assert run("mig", "propose", "30000,15000,3000", "--gpu", "H100-80GB") == 0
    assert capsys.readouterr().out.startswith("option 1: 4g.40gb,2g.20gb,1g.10gb")
    assert run("mig", "propose", "90000", "--gpu", "H100-80GB") == 2


class NoDriver:
    """An NVML whose init fails as on a machine without an NVIDIA driver."""

    class NVMLError(Exception):
        pass

    def nvmlInit(self):
        raise self.NVMLError("Driver Not Loaded")


def test_show_without_a_gpu_says_so(capsys):
    with nvml.use_backend(NoDriver()):
        assert run("mig", "show") == 0
    assert "no NVIDIA GPU here" in capsys.readouterr().out


def test_show_lists_instances_and_uuids_and_changes_nothing(tmp_path, capsys):
    sim = simulated_gpu("H100-80GB")
    with nvml.use_backend(sim):
        with make_mode(ModeSpec("mig", {"layout": "4g,3g"}), workdir=tmp_path, gpu=0, device="cuda") as m:
            uuids = [c.uuid for c in m.mig.created]
            calls = list(sim.calls)
            assert run("mig", "show") == 0
            assert sim.calls == calls
    out = capsys.readouterr().out
    assert "MIG mode: enabled" in out and "4g.40gb at 0:4" in out and "3g.40gb at 4:4" in out
    assert all(u in out for u in uuids)
    with nvml.use_backend(simulated_gpu("H100-80GB", mig_capable=False)):
        run("mig", "show")
    assert "MIG: not supported" in capsys.readouterr().out


def test_a_layout_read_as_an_option_says_what_to_write(capsys):
    """Before: `mig plan -1x1g` said only "the following arguments are required: layout" (issue 53)."""
    with pytest.raises(SystemExit) as ended:
        main(["mig", "plan", "-1x1g"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "`colloc-kit mig plan 3g,2g,1g`" in err and "read as an option" in err


def test_an_empty_gpu_model_is_refused(capsys):
    """Before: `mig plan 3g --gpu ''` planned for the default card without a word (issue 53)."""
    assert run("mig", "plan", "3g", "--gpu", "") == 2
    assert "--gpu is empty; give a GPU model (H100-80GB" in capsys.readouterr().err


def test_a_hundred_instances_are_explained_in_one_short_line(capsys):
    """Before: 1.4 KB repeating `1g.10gb 1` a hundred times (issue 53)."""
    assert run("mig", "plan", ",".join(["1g"] * 100), "--gpu", "H100-80GB") == 2
    err = capsys.readouterr().err
    assert len(err) < 300 and "(100 x 1g.10gb 1 each)" in err and err.count("1g.10gb") == 5

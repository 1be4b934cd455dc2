"""A sharing mode of one's own is one file: the kit finds it (COLLOC_KIT_MODES) in `colloc-kit run --help`, in a YAML
spec, in the panel's choices and in `colloc-kit info`, with no file of the kit edited. Real processes, real runs."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import colloc_kit

ROOT = Path(__file__).resolve().parent.parent
CAPPED = textwrap.dedent('''
    """A mode of one's own: naive time-slicing, each job with few hardware work queues."""
    from colloc_kit.modes import NaiveMode, Option, Slot


    class CappedNaiveMode(NaiveMode):
        """All jobs at once, each with CUDA_DEVICE_MAX_CONNECTIONS set (fewer hardware queues per job)."""

        name = "capped"
        takes = (Option("max_connections", int, "CUDA_DEVICE_MAX_CONNECTIONS of every job"),)

        def slots(self, n_jobs):
            cap = self.options.get("max_connections", 1)
            return [Slot(f"capped-{i}", {**slot.env, "CUDA_DEVICE_MAX_CONNECTIONS": str(cap)}, {"max_connections": cap})
                    for i, slot in enumerate(super().slots(n_jobs))]
''')
TINY_JOB = "{model: smallcnn, device: cpu, batch_size: 8, image_size: 32, workers: 0, warmup_steps: 2, steps: 8, " \
           "interval_s: 0.1, synthetic_samples: 64}"


@pytest.fixture
def plugin_dir(tmp_path) -> Path:
    """A folder on no path of the kit's, holding the one file that defines the mode."""
    folder = tmp_path / "lab_plugins"
    folder.mkdir()
    (folder / "capped_naive.py").write_text(CAPPED)
    return folder


def kit(*argv: str, modes: str | None, pythonpath: Path | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`colloc-kit ARGV` (or `python -c` with argv[0] == "-c") in a fresh process with COLLOC_KIT_MODES set as given."""
    env = {k: v for k, v in os.environ.items() if k != "COLLOC_KIT_MODES"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath or ""), str(ROOT)]))
    if modes is not None:
        env["COLLOC_KIT_MODES"] = modes
    cmd = [sys.executable, *argv] if argv[0] == "-c" else [sys.executable, "-m", "colloc_kit.cli", *argv]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


def test_a_mode_in_one_file_shows_in_run_help_and_info(plugin_dir):
    without = kit("run", "--help", modes=None)
    assert "capped" not in without.stdout and "--max-connections" not in without.stdout
    helped = kit("run", "--help", modes="capped_naive", pythonpath=plugin_dir)
    assert helped.returncode == 0, helped.stderr
    assert "capped" in helped.stdout
    assert "--max-connections" in helped.stdout and "capped: CUDA_DEVICE_MAX_CONNECTIONS of every job" in helped.stdout
    info = kit("info", "--json", modes=str(plugin_dir / "capped_naive.py"))  # a file's path works as well
    assert info.returncode == 0, info.stderr
    row = next(m for m in json.loads(info.stdout)["modes"] if m["mode"] == "capped")
    assert row["runs_here"] and row["options"] == ["max_connections"] and row["summary"].startswith("All jobs at once")


@pytest.mark.slow
def test_a_mode_in_one_file_runs_from_a_yaml_spec_with_its_flag(plugin_dir, tmp_path):
    spec = tmp_path / "capped.yaml"
    spec.write_text(f"jobs: [{TINY_JOB}]\nmodes: [{{name: capped, max_connections: 1}}]\ncopies: 2\n")
    refused = kit("run", str(spec), "--out", str(tmp_path / "runs"), modes=None)
    assert refused.returncode == 2 and "unknown sharing mode 'capped'" in refused.stderr
    done = kit("run", str(spec), "--max-connections", "2", "--out", str(tmp_path / "runs"), "--quiet",
               modes="capped_naive", pythonpath=plugin_dir)
    assert done.returncode == 0, done.stderr
    jobs = colloc_kit.load(tmp_path / "runs").jobs
    assert list(jobs["mode"]) == ["capped", "capped"]
    assert list(jobs["status"]) == ["complete", "complete"]
    assert list(jobs["slot_max_connections"]) == [2, 2]  # the flag overrode the YAML key


@pytest.mark.slow
def test_a_mode_in_one_file_is_among_the_panels_choices(plugin_dir):
    show = ("from colloc_kit.notebook.panel import ExperimentPanel\n"
            "panel = ExperimentPanel(models=['smallcnn'], modes=['naive'], job={'device': 'cpu'})\n"
            "print([label for label, _ in panel.mode.options])")
    assert "'capped'" not in kit("-c", show, modes=None).stdout
    shown = kit("-c", show, modes="capped_naive", pythonpath=plugin_dir)
    assert shown.returncode == 0, shown.stderr
    labels = eval(shown.stdout.strip().splitlines()[-1])
    assert labels[0] == "naive" and "capped" in labels and "mig" not in labels  # mig needs a layout: not offered bare


def test_a_plugin_that_does_not_load_is_one_line_and_exit_2(tmp_path):
    missing = kit("run", "--help", modes="no_such_lab_module")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [missing.stderr.strip()]
    assert "COLLOC_KIT_MODES names 'no_such_lab_module', which did not load" in missing.stderr


def test_a_plugin_with_a_syntax_error_stops_only_the_commands_that_need_modes(tmp_path):
    """Before: `show` (which needs no mode) refused with the plug-in's SyntaxError too (issue 53)."""
    broken = tmp_path / "broken_mode.py"
    broken.write_text("class Capped(:\n")
    shown = kit("show", str(ROOT / "tests" / "data" / "kit-b96d848"), modes=str(broken))
    assert shown.returncode == 0 and "naive" in shown.stdout and "COLLOC_KIT_MODES" not in shown.stderr
    for argv in (["run", "--model", "smallcnn", "--device", "cpu", "--plan"], ["run", "--help"], ["info"]):
        refused = kit(*argv, modes=str(broken))
        assert refused.returncode == 2 and "SyntaxError" in refused.stderr and "broken_mode.py" in refused.stderr


def test_two_modes_of_one_name_are_refused(tmp_path):
    (tmp_path / "second_naive.py").write_text("from colloc_kit.modes import NaiveMode\n\n\n"
                                              "class Other(NaiveMode):\n    name = 'naive'\n")
    clash = kit("info", modes=str(tmp_path / "second_naive.py"))
    assert clash.returncode == 2 and "two sharing modes are named 'naive'" in clash.stderr


def installed(folder: Path, group: str, entries: str) -> Path:
    """`folder` as an installed package would leave it: a dist-info whose entry points name `entries` in `group`."""
    info = folder / "lab_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entries}\n")
    return folder


def test_a_mode_of_an_installed_package_is_found_by_its_entry_point(plugin_dir):
    show = "from colloc_kit.modes import registry\nprint(sorted(registry.registered()))"
    assert "'capped'" not in kit("-c", show, modes=None, pythonpath=plugin_dir).stdout  # on the path, not declared
    found = kit("-c", show, modes=None, pythonpath=installed(plugin_dir, "colloc_kit.modes", "capped = capped_naive"))
    assert found.returncode == 0, found.stderr
    assert "'capped'" in found.stdout
    helped = kit("run", "--help", modes=None, pythonpath=plugin_dir)
    assert "--max-connections" in helped.stdout


def test_an_entry_point_that_does_not_load_is_one_line_and_exit_2(tmp_path):
    broken = kit("run", "--help", modes=None,
                 pythonpath=installed(tmp_path, "colloc_kit.modes", "gone = no_such_lab_module"))
    assert broken.returncode == 2
    assert broken.stderr.strip().splitlines() == [broken.stderr.strip()]
    assert "the entry point gone = no_such_lab_module (colloc_kit.modes), which did not load" in broken.stderr

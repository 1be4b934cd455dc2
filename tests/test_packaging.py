"""environment.yml installs the package, whose dependencies pyproject.toml declares once; .ci/run runs the README's
two set-up commands as the README writes them."""

import importlib.util
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
readme_commands = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_commands)
setup_commands = readme_commands.setup_commands


def test_environment_yml_installs_the_package_rather_than_repeating_its_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip_section == ["-e .[dev,lab]"], "the pip section installs colloc-kit itself, with the extras it needs"
    assert {"dev", "lab"} <= set(project["optional-dependencies"])


def test_ci_runs_the_readmes_two_set_up_commands_as_the_readme_writes_them():
    """.ci/run takes both commands from the README's set-up section when it runs (no copy of either), and that section
    holds exactly the two one-line commands: the main job (`colloc-kit batch`) and the tests."""
    commands = setup_commands((ROOT / "README.md").read_text())
    assert list(commands) == ["main", "tests"]
    assert commands["main"].endswith("colloc-kit batch") and "pytest" in commands["tests"]
    set_up = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
    assert all(command.startswith(set_up) for command in commands.values())
    ci = (ROOT / ".ci" / "run").read_text()
    for name, command in commands.items():
        assert f"python3 .ci/readme_commands.py {name})" in ci
        assert command not in ci and command.split(" && ")[-1] not in ci, f"a copy of the README's {name} command"


def test_a_readme_whose_set_up_section_changed_shape_is_refused_by_ci():
    with pytest.raises(SystemExit, match="must hold 2 one-line bash blocks"):
        setup_commands("## Set up\n\n```bash\nmake\n```\n\n## Next\n")
    with pytest.raises(SystemExit, match="no '## Set up' section"):
        setup_commands("# colloc-kit\n")

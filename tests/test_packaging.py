"""environment.yml installs the package, whose dependencies pyproject.toml declares once; .ci/run runs the README's
test command."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_environment_yml_installs_the_package_rather_than_repeating_its_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip_section == ["-e .[dev,lab]"], "the pip section installs colloc-kit itself, with the extras it needs"
    assert {"dev", "lab"} <= set(project["optional-dependencies"])


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, flags=re.S)
    test_command = next(line for block in commands for line in block.splitlines() if "pytest" in line)
    assert test_command.strip() in (ROOT / ".ci" / "run").read_text()

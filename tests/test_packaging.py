"""environment.yml and pyproject.toml name the same dependencies; .ci/run runs the README's test command."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_names_the_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {_name(r) for r in pip_section if not r.startswith("-e")}
    assert listed == wanted
    assert any(r.startswith("-e .") for r in pip_section), "the pip section installs colloc-kit itself"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, flags=re.S)
    test_command = next(line for block in commands for line in block.splitlines() if "pytest" in line)
    assert test_command.strip() in (ROOT / ".ci" / "run").read_text()

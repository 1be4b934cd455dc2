"""Notebooks use only colloc_kit's documented surface (`colloc_kit.__all__`), and every name of it is real and
documented: a notebook never imports an internal path (`colloc_kit.gpu...`, `colloc_kit.modes.mps`) nor edits
sys.path."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

import colloc_kit

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
SURFACE = set(colloc_kit.__all__)


def surface_problems(source: str) -> list[str]:
    """Every use in `source` of colloc_kit beyond `__all__`, and every sys.path edit, one line each.

    >>> surface_problems("from colloc_kit import plots\\nimport colloc_kit\\ncolloc_kit.run")
    []
    >>> surface_problems("from colloc_kit.gpu import nvml")
    ['line 1: imports colloc_kit.gpu; import from colloc_kit only']
    """
    problems = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            problems += [f"{where}: imports {a.name}; import colloc_kit only" for a in node.names
                         if a.name.startswith("colloc_kit.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("colloc_kit."):
            problems.append(f"{where}: imports {node.module}; import from colloc_kit only")
        elif isinstance(node, ast.ImportFrom) and node.module == "colloc_kit":
            problems += [f"{where}: colloc_kit.{a.name} is not in colloc_kit.__all__" for a in node.names
                         if a.name not in SURFACE]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "colloc_kit" and node.attr not in SURFACE and not node.attr.startswith("__"):
                problems.append(f"{where}: colloc_kit.{node.attr} is not in colloc_kit.__all__")
            if node.value.id == "sys" and node.attr == "path":
                problems.append(f"{where}: edits sys.path; import the installed package")
    return problems


def code_of(path: Path) -> str:
    """A notebook's code cells as one Python source (IPython magics and shell lines left out)."""
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return "\n".join(line for cell in cells for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebooks_use_only_the_documented_surface(path):
    assert surface_problems(code_of(path)) == []


@pytest.mark.parametrize("source, problem", [
    ("from colloc_kit.gpu import mig_planner", "imports colloc_kit.gpu"),
    ("from colloc_kit.modes.mps import partition_share", "imports colloc_kit.modes.mps"),
    ("import colloc_kit.views.plots", "imports colloc_kit.views.plots"),
    ("from colloc_kit import launcher", "colloc_kit.launcher is not in colloc_kit.__all__"),
    ("import colloc_kit\ncolloc_kit.rundir.RunDir", "colloc_kit.rundir is not in colloc_kit.__all__"),
    ("import sys\nsys.path.insert(0, '..')", "edits sys.path"),
])
def test_the_check_finds_internal_imports_and_path_edits(source, problem):
    (found,) = surface_problems(source)
    assert problem in found


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_every_name_of_the_surface_exists_and_is_documented(name):
    assert getattr(colloc_kit, name) is not None
    documented = (ROOT / "docs" / "architecture.md").read_text()
    assert re.search(rf"`{name}`", documented), f"docs/architecture.md's notebook surface does not name {name}"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = colloc_kit.no_such_name

"""The house rules of docs/architecture.md, read from the source. Every import counts: top-level, inside a function,
under `TYPE_CHECKING`, and a module started by name (`python -m colloc_kit.x`). No import circle in colloc_kit/
but the exceptions below, each with its reason; no module imports one of a row below its own; no module over 350
lines; no function over 60 lines without a reason in its docstring ("Long: ...")."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "colloc_kit"
ROWS = {  # docs/architecture.md's table: a module may import only from its own row or the rows above
    0: ["__init__", "errors", "statuses", "events", "atomic", "supervise", "stats", "paths", "interrupts", "serving"],
    1: ["gpu"],
    2: ["modes", "spec", "worker", "monitor"],
    3: ["store", "analysis"],
    4: ["pipeline", "machine", "tracking"],
    5: ["views", "experiments", "findings", "reference", "notebook", "batch", "cli", "predict"],
}
CIRCLE_EXCEPTIONS = {  # (importer, imported): why this edge of a circle is allowed
    ("colloc_kit.modes.registry", "colloc_kit.modes.base"):
        "type-only (TYPE_CHECKING): the registry's annotations name the class it holds; base registers each "
        "subclass with the registry as it is defined",
    ("colloc_kit.gpu.mig_instances", "colloc_kit.gpu.mig_state"):
        "type-only (TYPE_CHECKING): an instance's annotations name the simulated GPU it is on; mig_state builds "
        "the GPU's instances from mig_instances",
}
REACHING_DOWN: dict[tuple[str, str], str] = {}  # (importer, imported): why an import reaches a lower row
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 350, 60
MODULE_NAME = re.compile(r"colloc_kit(\.\w+)+")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """Every colloc_kit module `path` imports, wherever the import stands (`from . import x` counts as module x
    where x is a module), and every module it names whole in a string (started with `python -m`)."""
    tree, here = ast.parse(path.read_text()), module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            if target.startswith("colloc_kit"):
                found |= {f"{target}.{a.name}" if _exists(f"{target}.{a.name}") else target for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("colloc_kit")}
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value)
              and _exists(node.value)):
            found.add(node.value)
    return found - {here}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def circle(edges: dict[str, set[str]]) -> list[str] | None:
    """The first import circle found in `edges`, as the path that closes it; None if there is none."""
    done, path = set(), []

    def visit(module):
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(edges.get(module, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(module)
        return None

    return next((c for c in map(visit, sorted(edges)) if c), None)


def row(module: str) -> int:
    first = module.split(".")[1] if "." in module else "__init__"
    return next(r for r, names in ROWS.items() if first in names)


def test_every_module_has_a_row():
    for path in PACKAGE.rglob("*.py"):
        row(module_name(path))  # StopIteration: a new top-level module is missing from ROWS and the docs' table


def test_no_import_circle_counting_every_import():
    edges = {m: {t for t in targets if (m, t) not in CIRCLE_EXCEPTIONS} for m, targets in graph().items()}
    found = circle(edges)
    assert found is None, f"import circle: {' -> '.join(found)}"


def test_the_circle_check_sees_function_local_type_only_and_by_name_imports(tmp_path):
    """The counting itself: a circle closed by a function-local import, a TYPE_CHECKING one or a `-m` string."""
    source = tmp_path / "m.py"
    source.write_text('import typing\nif typing.TYPE_CHECKING:\n    from colloc_kit.spec import JobSpec\n'
                      'def f():\n    from colloc_kit.analysis import results\n'
                      'COMMAND = ["python", "-m", "colloc_kit.pipeline.entry"]\n')
    assert {"colloc_kit.spec", "colloc_kit.analysis.results", "colloc_kit.pipeline.entry"} <= imports_of_text(source)
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None


def imports_of_text(path: Path) -> set[str]:
    """`imports` of a file outside the package, read as if it were colloc_kit/m.py."""
    inside = PACKAGE / f"_probe_{path.stem}.py"
    try:
        inside.write_text(path.read_text())
        return imports(inside)
    finally:
        inside.unlink()


def test_every_circle_exception_is_still_an_edge():
    edges = graph()
    stale = [pair for pair in CIRCLE_EXCEPTIONS if pair[1] not in edges.get(pair[0], set())]
    assert not stale, f"remove these from CIRCLE_EXCEPTIONS, the import is gone: {stale}"


def test_imports_go_up_the_rows_only():
    wrong = [f"{module} (row {row(module)}) imports {t} (row {row(t)})"
             for module, targets in graph().items() for t in sorted(targets)
             if row(t) > row(module) and (module, t) not in REACHING_DOWN]
    assert not wrong, "\n".join(wrong)


def test_the_modes_never_import_the_spec_and_the_hardware_never_imports_a_mode():
    edges = graph()
    for module, targets in edges.items():
        if module.startswith("colloc_kit.modes"):
            assert not any(t == "colloc_kit.spec" or t.startswith("colloc_kit.spec.") for t in targets), module
        if module.startswith("colloc_kit.gpu"):
            assert not any(t.startswith(("colloc_kit.modes", "colloc_kit.monitor")) for t in targets), module


def test_the_schema_never_imports_an_executor():
    schema = [targets for module, targets in graph().items() if module.split(".")[:2] == ["colloc_kit", "spec"]]
    assert not any(t.startswith("colloc_kit.pipeline") for targets in schema for t in targets)


def test_no_module_over_350_lines():
    long = {module_name(p): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines()))
            > MAX_MODULE_LINES}
    assert not long, f"split these modules: {long}"


def test_no_function_over_60_lines_without_a_reason():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and "Long: " not in (ast.get_docstring(node) or ""):
                    long.append(f"{module_name(path)}.{node.name}: {lines} lines")
    assert not long, "shorten these, or say why in the docstring ('Long: ...'):\n" + "\n".join(long)


def declared_names(source: str) -> set[str]:
    """The names a module's top level assigns, those of `a, b = ...` and `x: T = ...` included.

    >>> sorted(declared_names("__getattr__, __dir__, __all__ = attach()\\nx: int = 1\\ny = 2"))
    ['__all__', '__dir__', '__getattr__', 'x', 'y']
    """
    found = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for target in targets:
            found |= {t.id for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                      if isinstance(t, ast.Name)}
    return found


def test_every_module_declares_all():
    """A tool (tab completion, `from x import *`, a type checker, the docs) sees each module's surface."""
    lacking = [module_name(p) for p in sorted(PACKAGE.rglob("*.py")) if "__all__" not in declared_names(p.read_text())]
    assert not lacking, f"declare __all__ in: {lacking}"


def _packages() -> list[Path]:
    """Every sub-package (the root's docstring is the public surface; its modules are docs/architecture.md's)."""
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)


@pytest.mark.parametrize("package", _packages(), ids=lambda p: module_name(p / "__init__.py"))
def test_each_package_docstring_lists_what_it_holds(package):
    """A newcomer opens a package's __init__ and finds each of its modules and sub-packages in one line each."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    held = sorted({p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
                  | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()})
    missing = [name for name in held if not re.search(rf"(?<![\w.]){re.escape(name)}\b", doc)]
    assert not missing, f"{module_name(package / '__init__.py')}'s docstring does not list {missing}"


def test_the_architecture_page_lists_every_row_entry_and_the_test_every_package():
    """docs/architecture.md's table and ROWS name the same packages and root modules, so neither drifts."""
    table = (PACKAGE.parent / "docs" / "architecture.md").read_text().split("## The run pipeline")[0]
    documented = set(re.findall(r"`(\w+)(?:/|\.py)`", table))
    in_rows = {name for names in ROWS.values() for name in names}
    on_disk = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert in_rows == on_disk, f"ROWS and the package differ: {sorted(in_rows ^ on_disk)}"
    assert documented == on_disk, f"docs/architecture.md's table and the package differ: {sorted(documented ^ on_disk)}"

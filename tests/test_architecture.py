"""The house rules of docs/architecture.md, read from the source: no import circle in colloc_kit/, and no module
imports one of a row below its own (the one-way flow spec -> mode -> launcher + monitor -> run store -> analysis)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "colloc_kit"
ROWS = {  # docs/architecture.md's table: a module may import only from its own row or the rows above
    0: ["__init__", "errors", "statuses", "events"],
    1: ["gpu"],
    2: ["modes", "spec", "worker", "zygote", "monitor", "standin"],
    3: ["rundir", "manifest", "figures", "results"],
    4: ["launcher", "cells", "experiment", "dispatch", "slurm", "progress", "machine"],
    5: ["analysis", "plots", "seed", "findings", "reference", "notebook", "background", "widgets", "batch", "cli",
        "mig_cli", "predict", "predict_check", "advise", "advise_cli"],
}
REACHING_DOWN = {  # imports inside a function that reach a lower row, each with its reason
    ("colloc_kit.spec", "colloc_kit.slurm"): "the spec checks its `slurm:` options against the Slurm module's table",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    """The colloc_kit modules `path` imports (`from . import x` counts as module x where x is a module)."""
    tree, here = ast.parse(path.read_text()), module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if not target.startswith("colloc_kit"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("colloc_kit")}
    return found - {here}


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def row(module: str) -> int:
    first = module.split(".")[1] if "." in module else "__init__"
    return next(r for r, names in ROWS.items() if first in names)


def test_every_module_has_a_row():
    for path in PACKAGE.rglob("*.py"):
        row(module_name(path))  # StopIteration: a new top-level module is missing from ROWS and the docs' table


def test_no_import_circle():
    graph = {module_name(p): imports(p, top_level_only=True) for p in PACKAGE.rglob("*.py")}
    done, path = set(), []

    def visit(module):
        assert module not in path, f"import circle: {' -> '.join(path[path.index(module):] + [module])}"
        if module in done:
            return
        path.append(module)
        for target in sorted(graph.get(module, ())):
            visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_imports_go_up_the_rows_only():
    wrong = [f"{module_name(p)} (row {row(module_name(p))}) imports {t} (row {row(t)})"
             for p in PACKAGE.rglob("*.py") for t in sorted(imports(p, top_level_only=False))
             if row(t) > row(module_name(p)) and (module_name(p), t) not in REACHING_DOWN]
    assert not wrong, "\n".join(wrong)


def test_the_modes_never_import_the_spec_and_the_hardware_never_imports_a_mode():
    for path in (PACKAGE / "modes").glob("*.py"):
        assert "colloc_kit.spec" not in imports(path, top_level_only=False), path
    for path in (PACKAGE / "gpu").glob("*.py"):
        assert not any(t.startswith(("colloc_kit.modes", "colloc_kit.monitor")) for t in imports(path, False)), path

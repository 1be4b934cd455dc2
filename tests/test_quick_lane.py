"""The quick lane (`pytest -m "not slow"`, the README's development section) reaches every package of colloc_kit: each
sub-package is imported by a test that is not marked slow, read from the tests' source."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "colloc_kit"


def _slow(node: ast.AST) -> bool:
    """Whether a decorator or a `pytestmark` value names `pytest.mark.slow`."""
    return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node))


def _colloc_kit_imports(nodes) -> set[str]:
    """The colloc_kit modules these nodes import, `from colloc_kit import x` counting as colloc_kit.x."""
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("colloc_kit"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("colloc_kit")}
    return found


def quick_imports(source: str) -> set[str]:
    """The colloc_kit modules a test module's quick tests reach: its top-level imports where one of its tests is not
    marked slow (neither by a decorator nor by a module-wide `pytestmark`), and the imports inside such a test."""
    tree = ast.parse(source)
    quick = _quick_tests(tree)
    if not quick:
        return set()
    return _colloc_kit_imports(tree.body) | _colloc_kit_imports(n for test in quick for n in ast.walk(test))


def _quick_tests(tree: ast.Module) -> list[ast.FunctionDef]:
    """A test module's tests that are not marked slow, neither by a decorator nor by a module-wide `pytestmark`."""
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets) and _slow(n.value)
           for n in tree.body):
        return []
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
            and not any(_slow(d) for d in n.decorator_list)]


# conftest.py's session products that take minutes to make: a test that asks for one is CI's, not the quick lane's
SESSION_PRODUCTS = ("smoke", "teacher_first_runs")


def quick_tests_waiting_for_a_product(source: str) -> list[str]:
    """The names of a test module's quick tests that take one of `SESSION_PRODUCTS` as an argument."""
    return [test.name for test in _quick_tests(ast.parse(source))
            if any(arg.arg in SESSION_PRODUCTS for arg in test.args.args)]


def packages() -> list[str]:
    return sorted(".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")
                  if p.parent != PACKAGE)


def test_every_package_is_imported_by_a_quick_test():
    reached = set().union(*(quick_imports(p.read_text()) for p in TESTS.glob("test_*.py")))
    missing = [package for package in packages() if not any(m == package or m.startswith(f"{package}.")
                                                            for m in reached)]
    assert not missing, f"no test outside the slow mark imports {missing}: give each a unit test in the quick lane"


def test_the_reading_sees_slow_modules_slow_tests_and_imports_inside_a_quick_test():
    slow_module = "import pytest\nfrom colloc_kit import batch\npytestmark = [pytest.mark.slow]\ndef test_a(): pass\n"
    mixed = ("import pytest\nfrom colloc_kit.gpu import nvml\n@pytest.mark.slow\ndef test_a():\n"
             "    from colloc_kit import views\ndef test_b():\n    import colloc_kit.store.folder\n")
    only_slow = "import pytest\nimport colloc_kit.cli\n@pytest.mark.slow\ndef test_a(): pass\n"
    assert quick_imports(slow_module) == set() and quick_imports(only_slow) == set()
    assert quick_imports(mixed) == {"colloc_kit.gpu", "colloc_kit.gpu.nvml", "colloc_kit.store.folder"}
    assert "colloc_kit.pipeline.executors" in packages() and "colloc_kit.gpu" in packages()


def test_no_quick_test_waits_for_the_cpu_smoke_batch_or_the_teacher_copies():
    """The cpu-smoke batch takes 2-3 minutes on the 2-core machine: a quick test that read it would make the quick lane
    as slow as its target (session 25: `test_the_readme_page_weights_are_the_smoke_batchs`, 143 s of its 241)."""
    waiting = {p.name: names for p in TESTS.glob("test_*.py")
               if (names := quick_tests_waiting_for_a_product(p.read_text()))}
    assert not waiting, f"mark these slow (they wait for a session product of conftest.py): {waiting}"
    sample = ("import pytest\ndef test_a(smoke): pass\n@pytest.mark.slow\ndef test_b(smoke): pass\n"
              "def test_c(tmp_path): pass\n")
    assert quick_tests_waiting_for_a_product(sample) == ["test_a"]

"""Every public definition of colloc_kit/ says what it is: each module-level function and class without a leading
underscore, and each public method of such a class, has a docstring (read from the source)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "colloc_kit"
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def public_definitions(source: str) -> list[tuple[str, ast.AST]]:
    """(qualified name, node) of each public function and class of `source`, and each public method of its public
    classes.

    >>> [name for name, _ in public_definitions("def f(): pass\\nclass C:\\n    def m(self): pass\\ndef _g(): pass")]
    ['f', 'C', 'C.m']
    """
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, DEFINITIONS) and not node.name.startswith("_"):
            found.append((node.name, node))
            if isinstance(node, ast.ClassDef):
                found += [(f"{node.name}.{sub.name}", sub) for sub in node.body
                          if isinstance(sub, DEFINITIONS) and not sub.name.startswith("_")]
    return found


def undocumented(source: str) -> list[str]:
    """The public definitions of `source` without a docstring.

    >>> undocumented('def f():\\n    "Does f."\\ndef g(): pass')
    ['g']
    """
    return [name for name, node in public_definitions(source) if ast.get_docstring(node) is None]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_public_definition_has_a_docstring(path):
    missing = undocumented(path.read_text())
    assert not missing, f"{path.relative_to(PACKAGE.parent)}: no docstring on {', '.join(missing)}"


def test_the_check_finds_a_method_without_a_docstring():
    source = 'class C:\n    """A class."""\n    def m(self):\n        return 1\n    def _private(self):\n        pass\n'
    assert undocumented(source) == ["C.m"]

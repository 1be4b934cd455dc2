"""jsonschema's `iri` format checkers bound to `rfc3987_syntax` at their first use, not at jsonschema's import.

plotly's renderers import nbformat, nbformat imports jsonschema, and jsonschema (4.26.0 here) imports `rfc3987_syntax`
where it is installed (JupyterLab brings it: `jupyter-events` asks for `jsonschema[format-nongpl]`), which builds an
Earley parser of RFC 3987's grammar as it is imported: about 1.4 s of CPU in every kernel that shows a figure and
every process that reads a notebook, for a check that validating a notebook never makes (its schema has no `iri`).
`defer()` imports jsonschema with a stand-in for `rfc3987_syntax` that offers only `is_valid_syntax`, the one name
jsonschema takes, which imports the real module at its first call; the stand-in is gone from `sys.modules` once
jsonschema is imported, so that any later `import rfc3987_syntax` is the real one. jsonschema registers the same
`iri` and `iri-reference` checkers, which answer the same.

    >>> defer()
    >>> from jsonschema import FormatChecker
    >>> FormatChecker().conforms("https://example.org/a?b#c", "iri"), FormatChecker().conforms("no iri", "iri")
    (True, False)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__all__ = ["defer", "is_valid_syntax"]


def defer() -> None:
    """Import jsonschema with `rfc3987_syntax` loaded at its first check; nothing where jsonschema or
    `rfc3987_syntax` is already imported, or where `rfc3987_syntax` is not installed."""
    if {"jsonschema", "rfc3987_syntax"} & sys.modules.keys() or importlib.util.find_spec("rfc3987_syntax") is None:
        return
    stand_in = types.ModuleType("rfc3987_syntax", "stands in while jsonschema imports (colloc_kit.views.deferred_iri)")
    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules["rfc3987_syntax"] = stand_in
    try:
        importlib.import_module("jsonschema")
    finally:
        if sys.modules.get("rfc3987_syntax") is stand_in:
            del sys.modules["rfc3987_syntax"]


def is_valid_syntax(term: str, value: str) -> bool:
    """`rfc3987_syntax.is_valid_syntax(term, value)`, the real module imported at the first call."""
    real = importlib.import_module("rfc3987_syntax")
    return real.is_valid_syntax(term, value)

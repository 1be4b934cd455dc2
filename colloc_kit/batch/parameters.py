"""The parameters a batch gives a notebook (`-p KEY=VALUE`, a profile's values), checked before anything runs against
the type of the value each notebook declares for it: `-p REPEATS=abc` is refused at once (exit 2), not an hour later
inside the notebook.

    >>> check_types({"REPEATS": 3}, {"REPEATS": {"default": "1"}}, "03_naive")
    >>> check_types({"REPEATS": "abc"}, {"REPEATS": {"default": "1"}}, "03_naive")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: -p REPEATS='abc': 03_naive takes a whole number there (its default: 1); ...
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

from colloc_kit.errors import BadInput

__all__ = ["check_types"]

KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text", list: "a list such as [1, 2]",
         dict: "a mapping such as {a: 1}"}


def _fits(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def check_types(values: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]], notebook: str) -> None:
    """BadInput naming the first value of `values` whose type differs from its default's in `declared` (papermill's
    `inspect_notebook` of `notebook`); a default that is not a plain literal (or None) takes anything."""
    for key, value in values.items():
        try:
            default = ast.literal_eval(str(declared.get(key, {}).get("default")))
        except (ValueError, SyntaxError):
            continue
        if default is None or type(default) not in KINDS or _fits(value, default):
            continue
        raise BadInput(f"-p {key}={value!r}: {notebook} takes {KINDS[type(default)]} there (its default: "
                       f"{declared[key]['default']}); e.g. -p {key}={declared[key]['default']}")

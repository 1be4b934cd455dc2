"""The schema's value checks, and how a refusal quotes a value: `require` raises BadInput with the message; a huge
value from a hostile spec is quoted in part (`excerpt`), never whole.

    >>> is_positive_number(True), is_positive_number(2.5), is_int(3), is_int(3.0)
    (False, True, True, False)
    >>> len(excerpt(["x" * 1000] * 1000)) <= 60
    True
    >>> require(False, "seconds must be a positive number")
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: seconds must be a positive number
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

from colloc_kit.errors import BadInput

__all__ = ["require", "is_int", "is_positive_number", "excerpt", "listed"]

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 50, 50, 6, 6, 3


def require(condition: Any, message: str) -> None:
    """BadInput(`message`) unless `condition` holds."""
    if not condition:
        raise BadInput(message)


def is_int(value: Any) -> bool:
    """A whole number; a bool is not one here."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_positive_number(value: Any) -> bool:
    """A finite number above zero; a bool is not a number here (`seconds: true` is refused, not taken as 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def excerpt(value: Any, limit: int = 60) -> str:
    """A short repr for messages: a huge value from a hostile spec is quoted in part, never whole."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def listed(keys: set, limit: int = 200) -> str:
    """Keys as 'a, b, c' for a message, cut short after `limit` characters.

    >>> listed({"b", "a"})
    'a, b'
    """
    text = ", ".join(sorted(str(k) for k in keys))
    return text if len(text) <= limit else text[:limit - 3] + "..."

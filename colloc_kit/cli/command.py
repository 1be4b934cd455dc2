"""The `colloc-kit` console script (pyproject.toml's `[project.scripts]`): Ctrl-C guarded from its first moment
(`interrupts`), then the command itself (`cli.main`). This module imports nothing heavy at its top, so that an
interrupt while pandas and torch load exits 130 with one line, as one at any later moment does.

    >>> main(["mig", "plan", "3g,2g", "--gpu", "H100-80GB"])               # doctest: +SKIP
    0
"""

from __future__ import annotations

from colloc_kit.interrupts import exit_on_interrupt

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The `colloc-kit` command: the interrupt guard first, then `cli.main(argv)`; its exit code."""
    exit_on_interrupt()
    from colloc_kit.cli.main import (  # noqa: PLC0415 - after the guard: Ctrl-C while the kit loads exits 130
        main as command,
    )

    return command(argv)

"""Ctrl-C at any moment of a `colloc-kit` command, its first imports included: one line on stderr and exit code 130,
never a traceback. The command installs this first thing (`command.py`, and `python -m colloc_kit.cli.main`), before it
imports pandas and torch: an interrupt in that first second is caught too. It imports nothing else, so that it is in
place within milliseconds of the start.

    >>> import sys
    >>> exit_on_interrupt(); sys.excepthook.__name__
    'exit_on_interrupt_hook'
    >>> sys.excepthook = sys.__excepthook__  # as it was
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import NoReturn

__all__ = ["EXIT_INTERRUPTED", "exit_on_interrupt", "exit_interrupted"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def exit_on_interrupt() -> None:
    """From now on, a KeyboardInterrupt that nothing caught ends the process with one line and exit code 130
    (`exit_interrupted`); any other uncaught exception is reported as before."""
    previous = sys.excepthook

    def exit_on_interrupt_hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            exit_interrupted("interrupted")
        previous(kind, value, tb)

    sys.excepthook = exit_on_interrupt_hook


def exit_interrupted(message: str) -> NoReturn:
    """Print `colloc-kit: <message>` on stderr and end the process at once with exit code 130 (what was printed
    before is flushed; nothing else runs)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe, a closed or absent stream
            pass
    try:
        os.write(2, f"colloc-kit: {message}\n".encode())
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)

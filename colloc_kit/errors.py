"""The kit's exceptions: one base class, and the kinds a caller may want to tell apart.

Every message says what was wrong, what the machine has, and what to do::

    raise BadInput("batch size must be a positive integer, got -4; use e.g. --batch-size 64")

Every error the kit raises on purpose derives from `CollocKitError`; `BadInput` alone means "refused before anything
started".
"""

import re
from pathlib import Path

__all__ = ["BadInput", "BrokenPlugin", "BrokenRun", "CollocKitError", "DamagedData", "GpuStateError", "NvmlUnavailable",
           "shorten"]

WORD_CHARS, MESSAGE_CHARS = 200, 2000  # what one message quotes of one word, and in all


def shorten(message: str) -> str:
    """`message` as the kit says it: a long word (a 100 KB model name, a path) cut in the middle, and the whole at most
    MESSAGE_CHARS (its start and its end, which says what to do).

    >>> said = shorten("unknown model '" + "m" * 100_000 + "'; choose one of resnet18, ...")
    >>> len(said), said.endswith("mmm'; choose one of resnet18, ..."), "(100,003 characters)" in said
    (218, True, True)
    """
    def cut(match: re.Match) -> str:
        word = match.group()
        return f"{word[:WORD_CHARS // 2]}...({len(word):,} characters)...{word[-WORD_CHARS // 4:]}"

    message = re.sub(r"\S{%d,}" % (WORD_CHARS + 1), cut, message)
    if len(message) > MESSAGE_CHARS:
        message = f"{message[:MESSAGE_CHARS * 2 // 3]} ... {message[-MESSAGE_CHARS // 3:]}"
    return message


class CollocKitError(Exception):
    """Base class of every error the kit raises on purpose; its message is `shorten`ed (a hostile input quoted in it
    stays short)."""

    def __str__(self) -> str:
        return shorten(super().__str__())


class BadInput(CollocKitError):
    """The user asked for something invalid; refused before anything on the GPU changed (CLI exit code 2)."""


class DamagedData(BadInput):
    """A dataset file that is there but cannot be read (truncated, empty, the wrong shape); the message names the file,
    what is wrong and how to make a good one. `path`: that file (None in the copy torch re-raises from a data-loader
    process, whose message is cut back to the original's).

    >>> DamagedData("Caught DamagedData in DataLoader worker process 0.\\nOriginal Traceback ...\\n"
    ...             "colloc_kit.errors.DamagedData: d/3.png is truncated\\n").args[0]
    'd/3.png is truncated'
    """

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        name = type(self).__name__
        if message.startswith(f"Caught {name} in DataLoader"):  # torch's copy: the original's last line, no traceback
            message = message.rstrip().rpartition(f"{name}: ")[2]
        super().__init__(message)
        self.path = None if path is None else Path(path)


class BrokenRun(CollocKitError):
    """A run directory that cannot be read (a torn or foreign manifest, an unreadable file); says what is wrong. Not
    bad input: the folder was written, or damaged, before this command (the CLI still exits 2: nothing started).
    `path`: the file or run folder that cannot be read (None where the raiser did not know it).

    >>> BrokenRun("runs/x/manifest.json cannot be read as JSON", path="runs/x/manifest.json").path
    PosixPath('runs/x/manifest.json')
    """

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)


class BrokenPlugin(CollocKitError):
    """A plug-in (a mode module named in COLLOC_KIT_MODES) that does not load; says which and why (CLI exit 2)."""


class GpuStateError(CollocKitError):
    """The GPU is not in a state the kit can work with (a foreign MPS daemon, MIG busy, a missing driver...); `gpu`:
    the index of that GPU (None where the state is the machine's, e.g. a daemon serving every GPU).

    >>> GpuStateError("GPU 1 is in MIG mode", gpu=1).gpu
    1
    """

    def __init__(self, message: str, gpu: int | None = None) -> None:
        super().__init__(message)
        self.gpu = gpu


class NvmlUnavailable(CollocKitError):
    """NVML could not be loaded or initialised; `reason` says why in a few words (no driver, no GPU, library
    missing), the message says it with what to do.

    >>> NvmlUnavailable("NVML did not start: driver not loaded; install the driver", reason="driver not loaded").reason
    'driver not loaded'
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason

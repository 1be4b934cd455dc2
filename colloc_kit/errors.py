"""The kit's exceptions: one base class, and the kinds a caller may want to tell apart.

Every message says what was wrong, what the machine has, and what to do::

    raise BadInput("batch size must be a positive integer, got -4; use e.g. --batch-size 64")

Every error the kit raises on purpose derives from `CollocKitError`; `BadInput` alone means "refused before anything
started".
"""

__all__ = ["BadInput", "BrokenPlugin", "BrokenRun", "CollocKitError", "GpuStateError", "NvmlUnavailable"]


class CollocKitError(Exception):
    """Base class of every error the kit raises on purpose."""


class BadInput(CollocKitError):
    """The user asked for something invalid; refused before anything on the GPU changed (CLI exit code 2)."""


class BrokenRun(CollocKitError):
    """A run directory that cannot be read (a torn or foreign manifest, an unreadable file); says what is wrong. Not
    bad input: the folder was written, or damaged, before this command (the CLI still exits 2: nothing started)."""


class BrokenPlugin(CollocKitError):
    """A plug-in (a mode module named in COLLOC_KIT_MODES) that does not load; says which and why (CLI exit 2)."""


class GpuStateError(CollocKitError):
    """The GPU is not in a state the kit can work with (a foreign MPS daemon, MIG busy, a missing driver...)."""


class NvmlUnavailable(CollocKitError):
    """NVML could not be loaded or initialised; `reason` says why (no driver, no GPU, library missing)."""

"""The on-disk contract: a run's folder, its manifest, and the experiment folder around the runs.

    rundir       `RunDir`: one folder per run; `effective_status` (still running?); `read_streams` (a run, read once)
    claims       one owner per cell while it runs: a claim file per cell, taken before it starts, released after
    manifest     `Manifest`: manifest.json as a typed record, its one reader and its one writer
    folder       `ExperimentFolder`: out/<name>/ beside the runs (specs, machines, Slurm, dispatch logs, not-run)

    >>> from colloc_kit.store.manifest import MANIFEST
    >>> MANIFEST
    'manifest.json'
"""

__all__ = ["claims", "folder", "manifest", "rundir"]

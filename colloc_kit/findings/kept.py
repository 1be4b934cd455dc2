"""The report of a set kept on disk between processes: notebook 08's kernel, a batch's, the tests' and any process
that reports the same set with the same kit read back the first one's `report` (about 10 s of CPU on 2 cores) from
`predict.kept`, keyed by the set's bytes, the shipped sets' (the prediction errors read them) and the kit's source.

    >>> found = report_of("h100-80gb")                                  # doctest: +SKIP
    >>> found.gpu, len(found.claims)                                    # doctest: +SKIP
    ('H100-80GB', 4)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from colloc_kit import reference
from colloc_kit.errors import BadInput
from colloc_kit.findings.read import gpu_of, read
from colloc_kit.findings.render import Report, report
from colloc_kit.predict.kept import kept

__all__ = ["report_of"]


def report_of(data: str, gpu: str = "", models: dict[str, str] | None = None) -> Report:
    """The report notebook 08 shows: `read(data)` on `gpu`'s MIG tables (`gpu_of`), with `models` standing for the
    study's; kept where `data` is a shipped set or a folder, computed each time where it is neither (`read` says so)."""
    def compute() -> Report:
        results, not_run, source = read(data)
        return report(results, gpu_of(results, gpu), models, source=source, not_run=not_run)

    try:
        where = reference.folder(data)  # a shipped set's name or an exported set
    except BadInput:
        where = Path(data).expanduser()  # a folder of runs, or nothing: `read` tells them apart
    if not where.is_dir():
        return compute()
    slot = hashlib.sha256(repr((str(where.resolve()), gpu, sorted((models or {}).items()))).encode()).hexdigest()
    inputs = dict.fromkeys([where, *map(reference.folder, reference.available())])  # a shipped set's bytes once
    return kept(f"findings-{slot[:16]}", inputs, compute)

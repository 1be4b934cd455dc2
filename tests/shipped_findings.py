"""The findings of a reference set (`findings.report_of`, as notebook 08 and docs/findings.md have them), reported
once a test process and kept on disk for the others: tests/test_findings.py, test_readings.py and test_verdicts.py
read the same shipped sets, about 10 s a report on a 2-core CPU. The tests read a report, never change it."""

from __future__ import annotations

import functools

from colloc_kit import findings


@functools.cache
def shipped_findings(data: str) -> findings.Report:
    """The report of `data` (a shipped set's name or a folder), on the MIG table of the GPU its runs used."""
    return findings.report_of(data)

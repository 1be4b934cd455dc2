"""Cells as MLflow runs: what each run holds (`records`) and writing them to a tracking server (`log`, through
`client`); MLflow is imported only in `client`, and only when used.

    records      one parent run per cell's run folder, one child run per job, built from `load()`'s frames
    log          `export` (runs or a reference set to a server), `log_cell` (one cell as it completes)
    client       the MLflow client the kit writes with (`Tracker`), its settings, an MLflow error in one line
    writers      the daemon threads that write cells, stopped within a second by Ctrl-C (`written`, `Calls`)

    >>> from colloc_kit.tracking import records
    >>> records.__name__
    'colloc_kit.tracking.records'
"""

__all__ = ["client", "log", "records", "writers"]

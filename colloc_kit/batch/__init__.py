"""Headless batches: every notebook executed with papermill into an offline HTML report, and an index.

    command       `colloc-kit batch`: its options; its handler loads the notebook machinery only when a batch runs
    runner        `run_batch`: one fresh kernel per notebook, the index and batch.json
    profiles      the profiles (profiles.yaml), read without the notebook machinery
    pages         an executed notebook as an offline HTML report
    record        what a batch did: each notebook's outcome, index.html and batch.json
    parameters    the values a batch gives a notebook, checked against the types it declares
    profiles.yaml the batch profiles: parameters for every notebook, and per notebook

    >>> from colloc_kit.batch.command import parse_parameters
    >>> parse_parameters(["REPEATS=3"])
    {'REPEATS': 3}
"""

__all__ = ["command", "pages", "parameters", "profiles", "record", "runner"]

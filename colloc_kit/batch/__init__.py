"""Headless batches: every notebook executed with papermill into an offline HTML report, and an index.

    runner        `run_batch`: profiles (profiles.yaml), one fresh kernel per notebook, the index and batch.json
    pages         an executed notebook as an offline HTML report
    record        what a batch did: each notebook's outcome, index.html and batch.json
    parameters    the values a batch gives a notebook, checked against the types it declares
    profiles.yaml the batch profiles: parameters for every notebook, and per notebook

    >>> from colloc_kit.batch import runner
    >>> sorted(runner.load_profiles())[:2]
    ['cpu-smoke', 'gpu-quick']
"""

__all__ = ["pages", "parameters", "record", "runner"]

"""colloc-kit: measure how much a GPU gains when several training jobs share it, and which way of sharing serves.

    >>> import colloc_kit
    >>> results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "steps": 30}], mode="naive", copies=2)  # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                                                        # doctest: +SKIP
"""

__version__ = "0.1.0"

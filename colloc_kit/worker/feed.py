"""A job's feed: where its batches come from, whatever the data (`loaders.build_feed` makes one).

    >>> feed = Feed(epoch=lambda: iter([]), steps_per_epoch=0, num_classes=10, image_size=32, label="nothing")
    >>> list(feed.epoch()), feed.close()
    ([], None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

__all__ = ["Feed"]


@dataclass
class Feed:
    """Where a job's batches come from: `epoch()` gives one pass as (images, labels) on the device; `close()` ends
    its loader worker processes (none for synthetic data)."""

    epoch: Callable[[], Iterator[tuple[Any, Any]]]
    steps_per_epoch: int
    num_classes: int
    image_size: int
    label: str
    close: Callable[[], None] = lambda: None

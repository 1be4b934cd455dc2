"""The inference job's terms, shared by the schema, the worker and the read side: its roles, a latency target given
as text with units, and the checks of its options (refused before anything starts, exit 2).

A job with `role: serve` serves requests instead of training: each request is `batch_size` images, arriving
open-loop (`rate_per_s`, Poisson) or closed-loop (`concurrency` clients, each sending its next request when the
last is answered), queued and served in order, up to `max_batch` requests at once after waiting at most
`max_delay_ms` for a fuller batch. Its latency target `slo` is text with units::

    >>> slo_ms("50ms"), slo_ms("0.2 s"), slo_ms("1500us")
    (50.0, 200.0, 1.5)
    >>> slo_ms("50")
    Traceback (most recent call last):
    ...
    colloc_kit.errors.BadInput: slo needs units, e.g. 50ms or 0.05s; got '50'
"""

from __future__ import annotations

import math
import re
from typing import Any

from colloc_kit.errors import BadInput

__all__ = ["MAX_QUEUE", "ROLES", "SERVE", "TRAIN", "check_serving", "slo_ms"]

TRAIN, SERVE = "train", "serve"
ROLES = (TRAIN, SERVE)
MAX_QUEUE = 4096  # requests an open-loop job keeps queued at most; past it arrivals are dropped (and counted)
UNITS_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001}
DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|us)\s*")
SERVE_ONLY = ("rate_per_s", "concurrency", "slo")


def slo_ms(text: Any) -> float:
    """A latency target in milliseconds from text with units (ms, s, us); BadInput without units or above zero."""
    match = DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise BadInput(f"slo needs units, e.g. 50ms or 0.05s; got {text!r}")
    value = float(match[1]) * UNITS_MS[match[2]]
    if not (math.isfinite(value) and value > 0):
        raise BadInput(f"slo must be above zero, got {text!r}")
    return value


def check_serving(job: Any) -> None:
    """Refuse (BadInput) a JobSpec's serving options that cannot run: a role other than train or serve, a serve job
    with neither or both of rate and concurrency, a rate or concurrency at or below zero, an SLO without units, a
    batch larger than the request queue allows, serving options on a training job."""
    if job.role not in ROLES:
        raise BadInput(f"role must be train or serve, got {job.role!r}")
    given = [name for name in SERVE_ONLY if getattr(job, name) is not None]
    if job.role == TRAIN:
        if given:
            raise BadInput(f"{', '.join(given)}: options of an inference job; add role: serve (--role serve)")
        return
    rate, clients = job.rate_per_s, job.concurrency
    if (rate is None) == (clients is None):
        raise BadInput("a serve job needs one of rate_per_s (open loop, e.g. --rate-per-s 100) or concurrency "
                       "(closed loop, e.g. --concurrency 4)")
    if rate is not None and not (_number(rate) and rate > 0):
        raise BadInput(f"rate_per_s must be above zero requests per second, got {rate!r}")
    if clients is not None and not (_whole(clients) and clients > 0):
        raise BadInput(f"concurrency must be a positive number of clients, got {clients!r}")
    if job.slo is not None:
        slo_ms(job.slo)
    if not (_whole(job.max_batch) and job.max_batch > 0):
        raise BadInput(f"max_batch must be a positive number of requests, got {job.max_batch!r}")
    queue = clients if clients is not None else MAX_QUEUE
    if job.max_batch > queue:
        raise BadInput(f"max_batch {job.max_batch} is larger than the request queue allows ({queue}: "
                       f"{'the concurrency' if clients is not None else 'MAX_QUEUE'}); lower --max-batch")
    if not (_number(job.max_delay_ms) and job.max_delay_ms >= 0):
        raise BadInput(f"max_delay_ms must be a number of milliseconds >= 0, got {job.max_delay_ms!r}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

"""The parameters a batch gives a notebook (`-p KEY=VALUE`, a profile's values), checked before anything runs against
the type of the value each notebook declares for it, then the contents of those the kit reads (JOB, DEVICE, MODELS,
COPIES): `-p REPEATS=abc` and `-p 'JOB={steps: -5}'` are refused at once (exit 2), not an hour later inside the
notebook.

    >>> check_types({"REPEATS": 3}, {"REPEATS": {"default": "1"}}, "03_naive")
    >>> check_types({"REPEATS": "abc"}, {"REPEATS": {"default": "1"}}, "03_naive")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: -p REPEATS='abc': 03_naive takes a whole number there (its default: 1); ...
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

from colloc_kit.errors import BadInput
from colloc_kit.notebook.setup import check_parameters
from colloc_kit.spec import JobSpec

__all__ = ["check_contents", "check_types"]

KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text", list: "a list such as [1, 2]",
         dict: "a mapping such as {a: 1}"}


def _fits(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def check_types(values: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]], notebook: str) -> None:
    """BadInput naming the first value of `values` whose type differs from its default's in `declared` (papermill's
    `inspect_notebook` of `notebook`); a default that is not a plain literal (or None) takes anything."""
    for key, value in values.items():
        try:
            default = ast.literal_eval(str(declared.get(key, {}).get("default")))
        except (ValueError, SyntaxError):
            continue
        if default is None or type(default) not in KINDS or _fits(value, default):
            continue
        raise BadInput(f"-p {key}={value!r}: {notebook} takes {KINDS[type(default)]} there (its default: "
                       f"{declared[key]['default']}); e.g. -p {key}={declared[key]['default']}")


def check_contents(values: Mapping[str, Any], notebook: str) -> None:
    """BadInput naming the first of `values` (types checked) whose contents `notebook` would refuse when it runs: JOB's
    keys and values as a job takes them, DEVICE, each model of MODELS, COPIES.

    >>> check_contents({"JOB": {"steps": -5}}, "03_naive")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: -p JOB={'steps': -5}: 03_naive cannot run it (job: steps must be a positive ...
    """
    job = values.get("JOB")
    if isinstance(job, dict):
        try:
            JobSpec.from_mapping({"model": "smallcnn", **job, "device": "cpu"})  # the notebook sets model and device
        except BadInput as exc:
            raise BadInput(f"-p JOB={job!r}: {notebook} cannot run it ({exc}); give JOB the keys and values of a "
                           "job, e.g. -p 'JOB={steps: 40, warmup_steps: 5}'") from None
    try:
        check_parameters(values.get("DEVICE", "auto"), values.get("MODELS", []), values.get("COPIES"))
    except BadInput as exc:
        raise BadInput(f"{notebook}: {exc}") from None

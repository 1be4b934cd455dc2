"""On a real GPU, READ-ONLY: the live MIG catalogue equals the built-in table. Nothing may change the card.

Run on the lent H100:  PYTHONPATH=$PWD python3 -m pytest tests/test_mig_gpu.py -v -rs
"""

import re

import pytest

from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GPU_MODELS, model_for_device
from colloc_kit.gpu.mig_live import live_catalogue

MUTATING = re.compile(r"Set|Create|Destroy|Reset|Clear")


class ReadOnly:
    """The real NVML module, with every call that could change the GPU refused before it reaches the driver."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        if name.startswith("nvml") and MUTATING.search(name):
            raise AssertionError(f"{name} would change the GPU; this test is read-only")
        return getattr(self._lib, name)


@pytest.mark.gpu
def test_live_catalogue_equals_the_built_in_table():
    real = nvml.backend()
    with nvml.use_backend(ReadOnly(real)), nvml.session() as lib:
        handle = lib.nvmlDeviceGetHandleByIndex(0)
        name = nvml.text(lib.nvmlDeviceGetName(handle))
        mode = nvml.optional(lib.nvmlDeviceGetMigMode, handle).value
        if mode is None:
            pytest.skip(f"{name} has no MIG")
        model = model_for_device(name)
        if model is None:
            pytest.skip(f"no built-in MIG table for {name}")
        live = live_catalogue(0)
        assert lib.nvmlDeviceGetMigMode(handle) == mode  # untouched
    assert (live.compute_slices, live.memory_slices) == (model.compute_slices, model.memory_slices)
    built_in = {p.name: p for p in model.profiles}
    assert sorted(p.name for p in live.profiles) == sorted(built_in)
    for p in live.profiles:
        assert p == built_in[p.name], f"{p.name}: live {p} != built-in {built_in[p.name]}"
    assert model.name in GPU_MODELS

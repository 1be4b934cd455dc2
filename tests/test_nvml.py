"""`nvml.cuda_available`: torch's answer (is there a CUDA GPU?), asked of torch only where NVML counts a GPU, so that
a notebook's kernel on a machine without one does not import torch to learn it."""

import sys

import pytest
import torch
from fake_nvml import FakeNvml

from colloc_kit.gpu import nvml


def test_on_this_machine_the_answer_is_torchs():
    assert nvml.cuda_available() == torch.cuda.is_available()


@pytest.mark.parametrize("fake", [FakeNvml(gpus=0), FakeNvml(driver_loaded=False)], ids=["no GPU", "no driver"])
def test_where_nvml_counts_no_gpu_torch_is_not_asked(fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` would raise ImportError
    with nvml.use_backend(fake):
        assert nvml.cuda_available() is False


def test_where_nvml_counts_a_gpu_torch_decides(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: "torch's answer")
    with nvml.use_backend(FakeNvml(gpus=1)):
        assert nvml.cuda_available() == "torch's answer"

"""How a worker process ends (`worker.train.leave`): the GPU work it queued is waited for before `os._exit`, since an
MPS client that ends with kernels in flight faulted the MPS server and every client still running on it
(benchmarks/results/h200/mps-teardown). Over a stand-in torch: no GPU is needed to see the order."""

from __future__ import annotations

import types

import pytest

from colloc_kit.worker import train


class Exited(Exception):
    """What the stand-in os._exit raises, with the code it was given."""


def stand_in_torch(calls: list[str], initialized: bool = True, fails: bool = False) -> types.ModuleType:
    def synchronize() -> None:
        calls.append("synchronize")
        if fails:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: initialized, synchronize=synchronize)  # type: ignore
    return torch


@pytest.fixture
def calls(monkeypatch):
    """What leave() did, in order; os._exit stands in (it raises Exited), no loader processes."""
    done: list[str] = []

    def exit_(code: int) -> None:
        done.append(f"exit {code}")
        raise Exited(code)

    monkeypatch.setattr(train.os, "_exit", exit_)
    monkeypatch.setattr(train.multiprocessing, "active_children", list)
    return done


def test_a_worker_waits_for_the_gpu_work_it_queued_before_it_ends(monkeypatch, calls):
    monkeypatch.setitem(train.sys.modules, "torch", stand_in_torch(calls))
    with pytest.raises(Exited):
        train.leave(0)
    assert calls == ["synchronize", "exit 0"], "the queued kernels run to their end first, then the process ends"


def test_a_worker_whose_device_already_failed_still_leaves_with_its_code(monkeypatch, calls):
    monkeypatch.setitem(train.sys.modules, "torch", stand_in_torch(calls, fails=True))
    with pytest.raises(Exited):
        train.leave(train.EXIT_ERROR)
    assert calls == ["synchronize", f"exit {train.EXIT_ERROR}"]


@pytest.mark.parametrize("loaded", [True, False])
def test_a_worker_that_never_used_cuda_has_nothing_to_wait_for(monkeypatch, calls, loaded):
    if loaded:  # torch imported, CUDA never initialized (a CPU job, or bad input refused before the device)
        monkeypatch.setitem(train.sys.modules, "torch", stand_in_torch(calls, initialized=False))
    else:
        monkeypatch.delitem(train.sys.modules, "torch", raising=False)
    with pytest.raises(Exited):
        train.leave(train.EXIT_BAD_INPUT)
    assert calls == [f"exit {train.EXIT_BAD_INPUT}"]

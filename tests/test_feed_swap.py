"""Feed swaps (`ExperimentSpec.feed_swaps`, issue 50's pair kind 1): a kept launch serves a cell and then its GPU-only
twin, the feed replaced in the same worker processes (`feed {json}` on a held worker's stdin), on real CPU workers
(processes, loader workers, the stdin protocol) and fake CIFAR-10 files on disk."""

import json
import subprocess
import sys

import psutil
import pytest
from fake_datasets import write_cifar10

from colloc_kit import events


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    return write_cifar10(tmp_path_factory.mktemp("cifar"), images_per_batch=16)


class Worker:
    """A worker behind the stdin barrier on CIFAR-10 files with two loader workers, as the launcher talks to it."""

    def __init__(self, cifar):
        command = [sys.executable, "-m", "colloc_kit.worker", "--model", "smallcnn", "--device", "cpu",
                   "--steps", "5", "--warmup-steps", "2", "--batch-size", "8", "--dataset", "cifar10",
                   "--data-root", str(cifar), "--workers", "2", "--job-id", "w", "--barrier", "stdin"]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def until(self, kind):
        seen = []
        for line in self.proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == kind:
                return seen
        raise AssertionError(f"the worker ended before a {kind} event: {seen}")

    def say(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def held(self):
        """Its first window measured and ended: held, its loader workers running; their pids."""
        self.until(events.READY)
        self.say(events.GO)
        self.until(events.MEASURED)
        self.say(events.PAUSE)
        self.until(events.END)
        loaders = psutil.Process(self.proc.pid).children(recursive=True)
        assert len(loaders) == 2, "two loader workers"
        return loaders


def gone(processes):
    """Whether each process has ended and been reaped (no zombie left behind)."""
    return not [p for p in processes if psutil.pid_exists(p.pid) and p.is_running()]


@pytest.mark.slow
def test_a_held_worker_swaps_its_feed_ends_its_loader_workers_and_warms_up_on_the_new_feed(cifar):
    """`feed {json}` while held: the old feed's loader processes end (reaped), a `ready` says the swap and the new
    data, the model (its 10-way head: synthetic labels drawn from the model's classes) and process kept; the next
    window runs the spec's warm-up again, on the new feed; EOF: exit 0."""
    worker = Worker(cifar)
    loaders = worker.held()
    worker.say(f'{events.FEED} {json.dumps({"dataset": "synthetic", "data_root": None, "image_size": 32})}')
    swap = worker.until(events.READY)
    ready = swap[-1]
    assert [e["type"] for e in swap] == [events.READY], "nothing else reported while held"
    assert ready["feed_swap"] and ready["warm_window"] == 1 and ready["pid"] == worker.proc.pid
    assert ready["dataset"] == "synthetic" and ready["num_classes"] == 10 and ready["image_size"] == 32
    assert ready["feed_s"] > 0 and ready["first_batch_s"] > 0 and ready["primed_s"] == 0
    assert gone(loaders) and psutil.Process(worker.proc.pid).children(recursive=True) == [], "no loader left"
    worker.say(events.GO)
    window = worker.until(events.MEASURED)
    assert window[0]["type"] == events.START and window[0]["warmup_steps"] == 2 and window[0]["held_steps"] > 0
    assert not [e for e in window if e["type"] == events.READY], "the swap's ready announced this window"
    assert [e for e in window if e["type"] == events.INTERVAL and e["warmup"]], "warm-up again, on the new feed"
    worker.say(events.PAUSE)
    worker.until(events.END)
    worker.proc.stdin.close()
    assert worker.proc.wait(timeout=30) == 0


@pytest.mark.slow
@pytest.mark.parametrize("asked, says", [({"image_size": 64}, "built for 10 classes at 32 px"),
                                         ({"model": "resnet18"}, "some of the fields workers, dataset"),
                                         ({"dataset": "imagenet64", "data_root": "/nonexistent"}, "imagenet64")])
def test_a_swap_the_model_was_not_built_for_is_refused_and_the_worker_leaves_with_its_loaders(cifar, asked, says):
    """Another image size (the model's shapes), a field beyond the feed, data that is not there: bad input, exit 2,
    its loader processes ended."""
    worker = Worker(cifar)
    loaders = worker.held()
    worker.say(f"{events.FEED} {json.dumps(asked)}")
    error = worker.until(events.ERROR)[-1]
    assert error["kind"] == "bad_input" and says in error["message"], error
    assert worker.proc.wait(timeout=30) == 2 and gone(loaders)
    worker.proc.stdin.close()

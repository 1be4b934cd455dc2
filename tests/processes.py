"""Checks that the kit leaves no process behind (real processes), and the kit started as a process of its own
(`kit`) that must end in time leaving nothing (`ended`)."""

from __future__ import annotations

import subprocess
import sys
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest

from colloc_kit.spec import JobSpec
from colloc_kit.worker.zygote import Zygote


def survivors_of_killed_kit(kit: subprocess.Popen, below: list[psutil.Process], timeout: float) -> list:
    """SIGKILL `kit`, wait up to `timeout` s for the processes `below` it to end, and return those still running
    (killed now: ours, not left to the next test)."""
    kit.kill()
    kit.wait()
    _, alive = psutil.wait_procs(below, timeout=timeout)
    for proc in alive:
        proc.kill()
    return alive


class WorkerZygote:
    """The zygote that the kit's runs in this test process share (`pipeline.lane.shared_zygote`, conftest's
    `runs_share_one_zygote`), as a notebook's sweep shares one: started at its first use and again after a test
    killed it. It is the test session's, not a test's: the checks for processes left behind pass it over
    (`below_us`); a test about a zygote's own life is marked `own_zygote` and gets none."""

    zygote: Zygote | None = None

    @classmethod
    def get(cls) -> Zygote:
        if cls.zygote is None or cls.zygote.lost:
            if cls.zygote is not None:
                cls.zygote.close()
            cls.zygote = Zygote([JobSpec(model="smallcnn", device="cpu")])
        return cls.zygote

    @classmethod
    def pid(cls) -> int | None:
        return cls.zygote.pid if cls.zygote is not None else None


def below_us(*markers: str) -> list[psutil.Process]:
    """This test process's descendants whose command line holds one of `markers` (default: the kit's), the session's
    shared zygote (`WorkerZygote`) passed over."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            line = " ".join(proc.cmdline())
            if any(marker in line for marker in markers or ("colloc_kit",)) and proc.pid != WorkerZygote.pid():
                found.append(proc)
        except psutil.Error:  # ended, or a zombie, while we looked
            continue
    return found


def kit_processes_below_us() -> list[psutil.Process]:
    """This test process's descendants that run the kit (lanes, zygotes, workers): what a run must not leave behind.
    Other tests' helpers (a browser's driver on its way out) are not the kit's."""
    return below_us()


class KitWatch:
    """Every process of the kit that ran below process `root` (a server a test started: JupyterLab and its kernels),
    seen by looking at its tree every `every_s` s from a thread: so one orphaned later (its kernel gone, it was moved
    to init) is still known as theirs, and no other test's (or session's) process is taken for one."""

    def __init__(self, root: int, every_s: float = 0.2):
        self.root, self.seen = psutil.Process(root), {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, args=(every_s,), name="kit-watch", daemon=True)
        self._thread.start()

    def _look(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                below = self.root.children(recursive=True)
            except psutil.Error:  # the root ended
                return
            for proc in below:
                try:
                    if proc.pid not in self.seen and "colloc_kit" in " ".join(proc.cmdline()):
                        self.seen[proc.pid] = proc
                except psutil.Error:  # ended while we looked
                    continue

    def saw(self, proc: psutil.Process) -> bool:
        """Whether `proc` is one of the kit's processes seen below the root."""
        return self.seen.get(proc.pid) == proc  # the same process (a pid can be reused)

    def survivors(self, grace_s: float) -> list[psutil.Process]:
        """Stop looking; the kit's processes seen that still run after up to `grace_s` s."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + grace_s
        while (alive := [proc for proc in self.seen.values() if _running(proc)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        return alive


def _running(proc: psutil.Process) -> bool:
    """Whether `proc` still runs: the same process (not a later one given its pid), and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_tree(proc: subprocess.Popen, grace_s: float = 15,
              spare: Callable[[psutil.Process], bool] = lambda _: False) -> list[psutil.Process]:
    """Stop a server started by a test and every process under it: SIGTERM, then SIGKILL to whatever is still running
    after `grace_s` (but those `spare` names: the caller judges them); returns those that outlived even that."""
    below = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    children = [child for child in below if not spare(child)]
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        child.kill()
    return psutil.wait_procs(alive, timeout=10)[1]


REPO = Path(__file__).resolve().parents[1]


def _ctrl_c_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kit(*argv: object) -> subprocess.Popen:
    """`colloc-kit ARGV` as a process of its own."""
    return subprocess.Popen([sys.executable, "-m", "colloc_kit.cli", *map(str, argv)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_ctrl_c_as_in_a_terminal)


def ended(proc: subprocess.Popen, watch: KitWatch, timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the kit, which must end within `timeout` s and leave no process of the kit
    behind (a stopped one is continued and killed here, so that a failing case does not leave it to the next)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        out, err = proc.communicate()
        watch.survivors(grace_s=5)
        pytest.fail(f"the kit hung: still running {timeout} s later\n{err[-2000:]}")
    left = watch.survivors(grace_s=5)
    for survivor in left:
        survivor.kill()
    assert not left, f"left behind: {[(p.pid, ' '.join(p.cmdline())[:80]) for p in left]}"
    assert "Traceback" not in err, err
    return proc.returncode, out, err

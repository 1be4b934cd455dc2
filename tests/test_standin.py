"""Stand-in datasets: the real layout and formats, labelled as stand-ins wherever they are trained on."""

import os
import shlex
import subprocess
import sys

import pytest
from PIL import Image

from colloc_kit import events
from colloc_kit.cli.main import main
from colloc_kit.worker import standin


def test_cifar10_standin_has_the_real_layout_and_sizes(tmp_path):
    folder = standin.make("cifar10", tmp_path, images=25, progress=False)
    classes = sorted(p.name for p in (folder / "train").iterdir())
    assert classes == sorted(standin.CIFAR10_CLASSES)
    files = sorted((folder / "train").rglob("*.png"))
    assert len(files) == 25 and len(list((folder / "train" / "airplane").iterdir())) == 3  # 25 over 10: 3,3,3,3,3,2..
    assert {Image.open(f).size for f in files} == {(32, 32)}
    assert standin.is_standin(folder) and "random pixels" in (folder / standin.MARKER).read_text()


def test_a_make_that_was_interrupted_resumes_without_rewriting(tmp_path):
    folder = standin.make("cifar10", tmp_path, images=10, progress=False)
    first = folder / "train" / "cat" / "cat_0.png"
    stamp = first.stat().st_mtime_ns
    standin.make("cifar10", tmp_path, images=20, progress=False)
    assert first.stat().st_mtime_ns == stamp and len(list((folder / "train").rglob("*.png"))) == 20


def test_imagenet_standin_writes_jpegs_at_imagenet_sizes(tmp_path):
    written = standin._write_class(("imagenet", str(tmp_path / "n00000000"), 0, 6))
    files = sorted((tmp_path / "n00000000").glob("*.JPEG"))
    assert written == 6 and len(files) == 6
    assert {Image.open(f).size for f in files} <= set(standin.IMAGENET_SIZES)
    assert {Image.open(f).format for f in files} == {"JPEG"}


def test_the_cli_refuses_a_count_below_one_image_per_class(tmp_path, capsys):
    assert main(["data", "make", "imagenet64", "--root", str(tmp_path), "--images", "999"]) == 2
    assert "at least 1000" in capsys.readouterr().err and not (tmp_path / "imagenet64").exists()


@pytest.mark.slow
def test_a_job_trained_on_a_standin_says_so(tmp_path):
    folder = standin.make("cifar10", tmp_path, images=40, progress=False)
    out = subprocess.run([sys.executable, "-m", "colloc_kit.worker", "--model", "smallcnn", "--device", "cpu",
                          "--dataset", "imagefolder", "--data-root", str(folder), "--image-size", "32",
                          "--batch-size", "8", "--steps", "2", "--warmup-steps", "1", "--workers", "0"],
                         capture_output=True, text=True, timeout=120)
    ready = [e for e in map(events.parse, out.stdout.splitlines()) if e and e["type"] == events.READY]
    assert out.returncode == 0, out.stderr[-2000:]
    assert ready[0]["dataset_label"].startswith(standin.LABEL) and "10 classes" in ready[0]["dataset_label"]


def test_a_make_removes_only_the_temp_files_of_writers_that_are_gone(tmp_path):
    """The clean-up of a killed make's half-written images spares the temp file of a writer still alive (another make
    into the same root, at the same time: issue 53 saw it vanish mid-write)."""
    folder = tmp_path / "cifar10"
    (folder / "train" / "cat").mkdir(parents=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = folder / "train" / "cat" / f".cat_1.png.{os.getpid()}.tmp"
    stale = folder / "train" / "cat" / f".cat_2.png.{gone.pid}.tmp"
    for tmp in (live, stale):
        tmp.write_bytes(b"half an image")
    standin._remove_temps(folder)
    assert live.exists() and not stale.exists()


@pytest.mark.slow
def test_two_makes_into_one_root_at_once_both_succeed(tmp_path):
    """Two `data make` of one dataset into one root at the same time: both exit 0 and the data is whole."""
    command = [sys.executable, "-m", "colloc_kit.cli", "data", "make", "cifar10", "--root", str(tmp_path),
               "--images", "2000", "--quiet"]
    for _ in range(2):
        makes = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        failures = [make.communicate()[1] for make in makes if make.wait(timeout=300) != 0]
        assert failures == []
    assert len(list((tmp_path / "cifar10" / "train").glob("*/*.png"))) == 2000
    assert not list((tmp_path / "cifar10" / "train").glob("*/.*.tmp"))


def test_the_hint_after_a_make_is_one_shell_word_whatever_the_root(tmp_path, capsys):
    """Before: `--data-root 'r o'q ünï/cifar10'` (a quote inside quotes) was no valid shell word (issue 53)."""
    root = tmp_path / "r o'q ünï"
    assert main(["data", "make", "cifar10", "--root", str(root), "--images", "10", "--quiet"]) == 0
    hint = capsys.readouterr().out.split("--data-root ", 1)[1].strip()
    assert shlex.split(hint) == [str(root / "cifar10")]

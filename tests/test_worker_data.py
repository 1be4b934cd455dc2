"""The worker's models and datasets: fake copies of each format train through the real loaders; bad input is refused."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from fake_datasets import write_cifar10, write_imagefolder, write_imagenet64

from colloc_kit import events
from colloc_kit.errors import BadInput, DamagedData
from colloc_kit.gpu import nvml
from colloc_kit.spec import JobSpec
from colloc_kit.worker import MODEL_NAMES, check_job
from colloc_kit.worker.datasets import IMAGE_SUFFIXES, image_side, imagenet64_files
from colloc_kit.worker.disk_data import CIFAR10Files, ImageNet64, _npz_memmap
from colloc_kit.worker.loaders import build_feed
from colloc_kit.worker.models import build_model
from colloc_kit.worker.train import error_kind


def train_on(dataset: str, root, *extra: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "colloc_kit.worker", "--model", "smallcnn", "--device", "cpu",
                          "--dataset", dataset, "--data-root", str(root), "--batch-size", "8", "--epochs", "2",
                          "--warmup-steps", "2", *extra], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [events.parse(line) for line in out.stdout.splitlines()]


@pytest.mark.slow
def test_cifar10_trains_through_torchvision_with_loader_processes(tmp_path):
    evs = train_on("cifar10", write_cifar10(tmp_path, images_per_batch=8), "--workers", "1")
    ready, end = evs[0], evs[-1]
    assert ready["image_size"] == 32 and ready["num_classes"] == 10 and ready["steps_per_epoch"] == 5
    assert "40 training images" in ready["dataset_label"]
    assert end["type"] == "end" and end["steps"] == 10 and end["images_per_s"] > 0


@pytest.mark.slow
def test_imagenet64_trains_from_npz_batches(tmp_path):
    evs = train_on("imagenet64", write_imagenet64(tmp_path, files=2, images_per_file=12), "--workers", "0")
    assert evs[0]["image_size"] == 64 and evs[0]["num_classes"] == 1000 and evs[0]["steps_per_epoch"] == 3
    assert evs[-1]["type"] == "end" and evs[-1]["steps"] == 6


@pytest.mark.slow
def test_imagefolder_trains_at_the_asked_image_size(tmp_path):
    evs = train_on("imagefolder", write_imagefolder(tmp_path, classes=3, images_per_class=6), "--workers", "0",
                   "--image-size", "24")
    assert evs[0]["image_size"] == 24 and evs[0]["num_classes"] == 3 and evs[0]["steps_per_epoch"] == 2
    assert evs[-1]["type"] == "end"


def test_imagenet64_reads_stored_npz_by_memory_map_and_compressed_into_memory(tmp_path):
    stored = write_imagenet64(tmp_path / "stored", files=2, images_per_file=5, seed=1)
    packed = write_imagenet64(tmp_path / "packed", files=2, images_per_file=5, seed=1, compressed=True)
    assert isinstance(_npz_memmap(stored / "train_data_batch_1.npz", "data"), np.memmap)
    assert _npz_memmap(packed / "train_data_batch_1.npz", "data") is None
    a, b = ImageNet64(imagenet64_files(stored)), ImageNet64(imagenet64_files(packed))
    assert len(a) == len(b) == 10
    with np.load(stored / "train_data_batch_2.npz") as npz:
        row, label = npz["data"][3], npz["labels"][3]
    for ds in (a, b):
        image, target = ds[8]  # the fourth image of the second file
        assert image.shape == (3, 64, 64) and image.dtype == torch.uint8
        assert torch.equal(image.flatten(), torch.from_numpy(row)) and target == label - 1


def test_cifar10_copy_loads_through_the_real_class(tmp_path):
    write_cifar10(tmp_path, images_per_batch=4)
    ds = CIFAR10Files(str(tmp_path), train=True)
    assert len(ds) == 20 and ds.classes[0] == "airplane" and ds[0][0].size == (32, 32)


def test_synthetic_feed_is_one_batch_made_once(tmp_path):
    feed = build_feed(JobSpec(model="smallcnn", device="cpu", batch_size=4, synthetic_samples=10, image_size=8,
                              channels_last=True), torch.device("cpu"))
    batches = list(feed.epoch())
    assert feed.steps_per_epoch == len(batches) == 2 and "synthetic" in feed.label
    assert batches[0][0] is batches[1][0] and batches[0][0].shape == (4, 3, 8, 8)
    assert batches[0][0].is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.slow
def test_every_model_builds_and_runs(name):
    model = build_model(name, num_classes=7, image_size=32)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)


def test_resnet26_is_the_seed_studys_bottleneck_2222():
    model = build_model("resnet26", num_classes=10, image_size=32)
    assert [len(getattr(model, f"layer{i}")) for i in range(1, 5)] == [2, 2, 2, 2]
    assert type(model.layer1[0]).__name__ == "Bottleneck"


@pytest.mark.parametrize("fields, words", [
    ({"model": "lenet"}, ["unknown model 'lenet'", "resnet26", "vit_b_16"]),
    ({"model": "vit_b_16", "image_size": 40}, ["multiple of 16", "--image-size 224"]),
    ({"dataset": "mnist"}, ["unknown dataset 'mnist'", "imagenet64"]),
    ({"dataset": "cifar10"}, ["needs --data-root", "cifar.html"]),
    ({"dataset": "imagefolder", "data_root": "{tmp}"}, ["no class folders", "{tmp}/train"]),
    ({"batch_size": 64, "synthetic_samples": 32}, ["smaller than one batch"]),
    ({"batch_size": 1_000_000_000}, ["one batch of 1,000,000,000 images of 32 x 32 px needs 11,444 GiB",
                                     "lower --batch-size or --image-size"]),  # was a RuntimeError from alloc_cpu
    ({"image_size": 100_000}, ["images of 100,000 x 100,000 px", "GiB of memory"]),
])
def test_check_job_refuses_with_a_clear_message(tmp_path, fields, words):
    fields = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in fields.items()}
    with pytest.raises(BadInput) as info:
        check_job(JobSpec(**{"model": "smallcnn", "device": "cpu", **fields}))
    for word in words:
        assert word.format(tmp=tmp_path) in str(info.value)


def test_check_job_refuses_malformed_copies(tmp_path):
    root = write_cifar10(tmp_path / "c")
    (root / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(BadInput, match="lacks data_batch_3"):
        check_job(JobSpec(model="smallcnn", device="cpu", dataset="cifar10", data_root=str(root)))
    np.savez(tmp_path / "train_data_batch_1.npz", data=np.zeros((2, 12288), np.uint8))
    with pytest.raises(BadInput, match="lacks the array\\(s\\) labels"):
        check_job(JobSpec(model="smallcnn", device="cpu", dataset="imagenet64", data_root=str(tmp_path)))


def test_check_job_accepts_each_fake_copy(tmp_path):
    for dataset, root in [("cifar10", write_cifar10(tmp_path / "c")), ("imagenet64", write_imagenet64(tmp_path / "i")),
                          ("imagefolder", write_imagefolder(tmp_path / "f", train_subfolder=False))]:
        check_job(JobSpec(model="smallcnn", device="cpu", dataset=dataset, data_root=str(root)))


def test_the_image_suffixes_checked_are_imagefolders_own():
    from torchvision.datasets.folder import IMG_EXTENSIONS  # noqa: PLC0415 - heavy: this test only

    assert set(IMAGE_SUFFIXES) == set(IMG_EXTENSIONS)


def test_cuda_without_a_gpu_is_refused():
    no_gpu = types.SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 0)
    with nvml.use_backend(no_gpu), pytest.raises(BadInput, match="CUDA is not available on this machine.*--device cpu"):
        check_job(JobSpec(model="smallcnn", device="cuda"))


def test_error_kinds():
    assert error_kind(BadInput("x")) == "bad_input"
    assert error_kind(torch.cuda.OutOfMemoryError("CUDA out of memory")) == "out_of_memory"
    assert error_kind(RuntimeError("CUDA error: device-side assert triggered")) == "cuda_error"
    assert error_kind(RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")) == "cuda_error"
    assert error_kind(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) == "other"
    assert error_kind(ValueError("CUDA")) == "other"


def test_importing_the_worker_package_does_not_import_torch():
    code = "import sys, colloc_kit.worker; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_imagenet64_batch_files_in_order_and_stray_copies_ignored(tmp_path):
    for name in ("train_data_batch_10.npz", "train_data_batch_2.npz", "train_data_batch_old.npz"):
        (tmp_path / name).touch()
    assert [p.name for p in imagenet64_files(tmp_path)] == ["train_data_batch_2.npz", "train_data_batch_10.npz"]


@pytest.mark.parametrize("model, device, side", [("smallcnn", "cuda", 32), ("resnet18", "cpu", 32),
                                                 ("resnet18", "cuda", 224)])
def test_synthetic_images_are_32_px_for_smallcnn_and_on_the_cpu_unless_asked(model, device, side):
    assert image_side("synthetic", None, model, device) == side
    assert image_side("synthetic", 64, model, device) == 64
    assert image_side("cifar10", None, "resnet18", "cpu") == 32
    assert image_side("imagenet64", None, "smallcnn", "cpu") == 64


@pytest.mark.slow
def test_the_readmes_quick_cpu_command_trains_on_32_px_synthetic_images(tmp_path):
    """`colloc-kit run --mode naive --model smallcnn --copies 2 --device cpu --epochs 1` (its time:
    benchmarks/archive/quick_cpu.py)."""
    command = [sys.executable, "-m", "colloc_kit.cli", "run", "--mode", "naive", "--model", "smallcnn", "--copies", "2",
               "--device", "cpu", "--epochs", "1", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-2000:]
    readies = [e for path in tmp_path.rglob("*.events.jsonl") for e in map(json.loads, path.open())
               if e["type"] == events.READY]
    assert len(readies) == 2 and {e["image_size"] for e in readies} == {32}


def _spoil_cifar10(folder, damage):
    """Damage one file of a fake CIFAR-10 copy as `damage` says; returns that file's name."""
    if damage == "meta":
        (folder / "batches.meta").write_bytes(b"garbage, not a pickle")
        return "batches.meta"
    path = folder / "data_batch_2"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # rows of the wrong width
        batch = {"batch_label": "x", "labels": [1] * 16, "data": np.zeros((16, 3000), np.uint8), "filenames": []}
        path.write_bytes(pickle.dumps(batch, protocol=2))
    return "data_batch_2"


@pytest.mark.parametrize("damage, words", [("truncated", "cannot be read as a CIFAR-10 pickle"),
                                           ("empty", "is empty (0 bytes)"), ("width", "CIFAR-10's rows are 3072"),
                                           ("meta", "cannot be read as a CIFAR-10 pickle")])
def test_a_damaged_cifar10_file_is_named_with_what_is_wrong_and_how_to_make_a_good_one(tmp_path, damage, words):
    root = write_cifar10(tmp_path)
    name = _spoil_cifar10(root / "cifar-10-batches-py", damage)
    with pytest.raises(DamagedData) as info:
        build_feed(JobSpec(model="smallcnn", device="cpu", dataset="cifar10", data_root=str(root), batch_size=8),
                   torch.device("cpu"))
    said = str(info.value)
    assert f"cifar-10-batches-py/{name} " in said and words in said and "colloc-kit data make cifar10" in said
    assert info.value.path.name == name and error_kind(info.value) == "bad_input"


@pytest.mark.parametrize("arrays, words", [
    ({"data": np.zeros((4, 12288), np.uint8), "labels": list(range(1, 7))}, "holds 4 images but 6 labels"),
    ({"data": np.zeros((0, 12288), np.uint8), "labels": []}, "holds no image"),
    ({"data": np.zeros((4, 100), np.uint8), "labels": [1] * 4}, "uint8 rows of 12288 values")])
def test_a_damaged_imagenet64_batch_is_named(tmp_path, arrays, words):
    root = write_imagenet64(tmp_path, files=2, images_per_file=8)
    np.savez(root / "train_data_batch_2.npz", **arrays)
    with pytest.raises(DamagedData) as info:
        ImageNet64(imagenet64_files(root))
    said = str(info.value)
    assert "train_data_batch_2.npz " in said and words in said and "colloc-kit data make imagenet64" in said


@pytest.mark.parametrize("workers", [0, 1])
def test_a_truncated_png_is_named_also_from_a_loader_process(tmp_path, workers):
    root = write_imagefolder(tmp_path, classes=2, images_per_class=4)
    png = root / "train" / "class_1" / "2.png"
    png.write_bytes(png.read_bytes()[:60])
    feed = build_feed(JobSpec(model="smallcnn", device="cpu", dataset="imagefolder", data_root=str(root),
                              batch_size=8, workers=workers), torch.device("cpu"))
    with pytest.raises(DamagedData) as info:
        list(feed.epoch())
    said = str(info.value)
    assert said.startswith(f"{png} cannot be read as an image") and "Traceback" not in said
    assert "colloc-kit data make imagenet" in said

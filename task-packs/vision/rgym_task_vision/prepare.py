"""``prepare`` functions of the vision datasets (named in ``datasets/*.yaml``).

Each one finds the user's raw files (:mod:`rgym_task_vision.sources`), verifies
them by SHA-256, converts them once into what the starters read and keeps the
result in rgym's cache (:mod:`rgym_core.dataset_cache`).  The ``public`` folder is
what the agent sees (read-only, mounted at ``data/``); ``private`` holds the test
labels or reference captions and reaches the grader only.

Heavy modules (numpy, PIL, torch) are imported here, never by the plugin module.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from rgym_core import DatasetError, DatasetSpec, PreparedDataset, cached_build, check_data_dir
from rgym_task_vision import sources

FASHION_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot"]
CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck"]


def _prepared(spec: DatasetSpec, folder: Path) -> PreparedDataset:
    return PreparedDataset(id=spec.id, public=folder / "public", private=folder / "private")


def write_labels_csv(path: Path, labels) -> None:  # type: ignore[no-untyped-def]
    """The private test labels: ``id,label`` in test order (read by the stdlib grader)."""
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "label"])
        writer.writerows((i, int(y)) for i, y in enumerate(labels))


def _classification_readme(title: str, shape: str, classes: list[str], n_train: int,
                           n_test: int, source: str) -> str:
    lines = [f"# {title}", "", f"Converted by rgym from {source}.", "",
             "| file | content |", "| --- | --- |",
             f"| `train_images.npy` | {n_train} training images, uint8, shape {shape.format(n=n_train)} |",
             "| `train_labels.npy` | their labels, int64, 0-9 |",
             f"| `test_images.npy` | {n_test} test images, uint8, shape {shape.format(n=n_test)}, "
             f"in the original test order |",
             "", "The test labels are hidden: `submission.csv` needs one row per test image, in "
             "this order, with a column `label`.", "", "Classes:", ""]
    lines += [f"{i} {name}" for i, name in enumerate(classes)]
    return "\n".join(lines) + "\n"


def _write_classification(dest: Path, data: dict, title: str, shape: str, classes: list[str],
                          source: str) -> None:
    import numpy as np

    public, private = dest / "public", dest / "private"
    public.mkdir()
    private.mkdir()
    np.save(public / "train_images.npy", np.ascontiguousarray(data["train_images"], dtype=np.uint8))
    np.save(public / "train_labels.npy", np.asarray(data["train_labels"], dtype=np.int64))
    np.save(public / "test_images.npy", np.ascontiguousarray(data["test_images"], dtype=np.uint8))
    (public / "README.md").write_text(_classification_readme(
        title, shape, classes, len(data["train_labels"]), len(data["test_images"]), source))
    write_labels_csv(private / "test_labels.csv", data["test_labels"])


# ----------------------------------------------------------------------------- Fashion-MNIST

FASHION_FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
                 "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def prepare_fashion_mnist(spec: DatasetSpec, cache_dir: Path,
                          data_dir: Path | None) -> PreparedDataset:
    """The four original IDX files (gzip-compressed or not, SHA-256 of the
    decompressed bytes) converted to ``.npy`` arrays; test labels private."""
    from rgym_task_vision.formats import read_idx

    def build(dest: Path) -> None:
        files = sources.locate_verified(spec, data_dir)
        data = {key: read_idx(files[name]) for key, name in FASHION_FILES.items()}
        for split in ("train", "test"):
            images, labels = data[f"{split}_images"], data[f"{split}_labels"]
            if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.ndim != 1 \
                    or len(images) != len(labels):
                raise DatasetError(f"{files[FASHION_FILES[split + '_images']]}: expected "
                                   f"N x 28 x 28 images and N labels, got images {images.shape} "
                                   f"and labels {labels.shape}")
            if labels.size and int(labels.max()) > 9:
                raise DatasetError(f"{files[FASHION_FILES[split + '_labels']]}: labels outside 0..9")
        _write_classification(dest, data, spec.options.get("title", "Fashion-MNIST"), "({n}, 28, 28)",
                              FASHION_CLASSES, "the original IDX files")

    return _prepared(spec, cached_build(spec, cache_dir, "npy-v1", {}, build))


# ----------------------------------------------------------------------------- CIFAR-10

CIFAR_TARBALL = "cifar-10-python.tar.gz"


def prepare_cifar10(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """``cifar-10-python.tar.gz`` (verified by SHA-256, read without extracting)
    converted to ``.npy`` arrays (N, 32, 32, 3); the test batch's order is kept."""
    from rgym_task_vision.formats import read_cifar10_tarball

    def build(dest: Path) -> None:
        files = sources.locate_verified(spec, data_dir)
        data = read_cifar10_tarball(files[CIFAR_TARBALL])
        _write_classification(dest, data, spec.options.get("title", "CIFAR-10"), "({n}, 32, 32, 3)",
                              data["label_names"] or CIFAR_CLASSES, "cifar-10-python.tar.gz")

    return _prepared(spec, cached_build(spec, cache_dir, "npy-v1", {}, build))


# ----------------------------------------------------------------------------- ResNet-50 weights


def prepare_resnet50(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """The user's own ``resnet50-0676ba61.pth`` (torchvision's ImageNet weights),
    verified by SHA-256 and checked to load as a ResNet-50 state dict."""
    from rgym_task_vision.weights import check_resnet50_state_dict

    name = next(iter(spec.checksums))

    def build(dest: Path) -> None:
        files = sources.locate_verified(spec, data_dir)
        check_resnet50_state_dict(files[name])
        (dest / "public").mkdir()
        target = dest / "public" / name
        try:
            target.hardlink_to(files[name].resolve())
        except OSError:
            shutil.copyfile(files[name], target)

    return PreparedDataset(id=spec.id, public=cached_build(spec, cache_dir, "weights-v1", {},
                                                           build) / "public")


# ----------------------------------------------------------------------------- COCO captions


def prepare_coco(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """COCO's caption annotations and images (zips verified by SHA-256, or the
    extracted folders checked against the annotations) split into train/val/test
    and resized once; the test references are private."""
    from rgym_task_vision.coco import build_coco, coco_params, extracted_fingerprint

    check_data_dir(data_dir, "fashion-mnist/train-images-idx3-ubyte.gz")
    params = coco_params(spec)
    fingerprint = extracted_fingerprint(spec, data_dir, params["year"])
    if fingerprint is not None:
        params["extracted_annotations_sha256"] = fingerprint
    folder = cached_build(spec, cache_dir, "coco-v1", params,
                          lambda dest: build_coco(spec, data_dir, dest, params))
    return _prepared(spec, folder)

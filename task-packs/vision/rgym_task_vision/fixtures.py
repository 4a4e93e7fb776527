"""Small data in exactly the formats users hold, for tests and smoke runs.

* :func:`write_fashion_mnist` - the four IDX files (gzip-compressed or not);
* :func:`write_cifar10_tarball` - ``cifar-10-python.tar.gz`` with
  ``cifar-10-batches-py/`` pickles laid out as the real archive's;
* :func:`write_coco` - COCO-style ``captions_{train,val}<year>.json`` with
  generated JPEG images, as extracted folders or as COCO's zip archives;
* :func:`write_resnet50` - a randomly initialised ResNet-50 saved under
  torchvision's file name ``resnet50-0676ba61.pth``.

The content is seeded and learnable (each class or caption follows the image),
so a baseline's score on it is reproducible.  The files' checksums differ from
the real ones: :func:`fixture_spec` derives a dataset spec with the fixture's
checksums, and :func:`install_fixture_datasets` registers such specs through a
throwaway plugin so ``rgym run ... --dataset data=vision-fixture/cifar10`` runs
the real loaders, starters and graders on them::

    python -m rgym_task_vision.fixtures DIR      # DIR/data, DIR/site; prints how to run
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import random
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from rgym_core import DatasetSpec

FIXTURE_NAMESPACE = "vision-fixture"

# ----------------------------------------------------------------------------- images


def _class_images(n: int, size: int, channels: int, classes: int, seed: int) -> tuple[Any, Any]:
    """Noisy images whose class shows as a bright band (rows for 0-4, columns for 5-9)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    images = rng.integers(0, 70, (n, size, size, channels)).astype(np.int16)
    width = max(2, size // 6)
    for i, k in enumerate(labels):
        offset = 2 + (k % 5) * (size - 4 - width) // 4
        if k < 5:
            images[i, offset:offset + width, :, :] += 150
        else:
            images[i, :, offset:offset + width, :] += 150
    images = np.clip(images, 0, 255).astype(np.uint8)
    return (images[..., 0] if channels == 1 else images), labels.astype(np.uint8)


def _idx_bytes(array: Any) -> bytes:
    import numpy as np

    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def write_fashion_mnist(folder: Path, *, n_train: int = 1000, n_test: int = 300, seed: int = 0,
                        compress: bool = True) -> Path:
    """The four Fashion-MNIST IDX files (``.gz`` when ``compress``) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n, s in (("train", n_train, seed), ("t10k", n_test, seed + 1)):
        images, labels = _class_images(n, 28, 1, 10, s)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            data = _idx_bytes(array)
            name = f"{prefix}-{kind}-ubyte"
            if compress:
                (folder / f"{name}.gz").write_bytes(gzip.compress(data, mtime=0))
            else:
                (folder / name).write_bytes(data)
    return folder


def write_cifar10_tarball(path: Path, *, per_batch: int = 200, n_test: int = 300,
                          seed: int = 0) -> Path:
    """``cifar-10-python.tar.gz``: five training batches of ``per_batch`` images
    and a test batch, pickled (protocol 2, bytes keys) as the real archive."""
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse",
             b"ship", b"truck"]
    members: dict[str, bytes] = {}
    batches = [(f"data_batch_{i}", per_batch, seed + i) for i in range(1, 6)]
    for name, n, s in [*batches, ("test_batch", n_test, seed + 100)]:
        images, labels = _class_images(n, 32, 3, 10, s)
        batch = {b"batch_label": f"fixture {name}".encode(),
                 b"labels": [int(x) for x in labels],
                 b"data": images.transpose(0, 3, 1, 2).reshape(n, 3072),
                 b"filenames": [f"fixture_{name}_{i}.png".encode() for i in range(n)]}
        members[name] = pickle.dumps(batch, protocol=2)
    members["batches.meta"] = pickle.dumps({b"num_cases_per_batch": per_batch,
                                            b"label_names": names, b"num_vis": 3072}, protocol=2)
    members["readme.html"] = b"<html>rgym fixture of CIFAR-10</html>\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        folder = tarfile.TarInfo("cifar-10-batches-py")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for name, data in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


# ----------------------------------------------------------------------------- COCO

_COLOURS = {"red": (200, 30, 30), "green": (30, 170, 40), "blue": (30, 60, 210),
            "yellow": (230, 210, 30), "white": (240, 240, 240), "black": (15, 15, 15)}
_SHAPES = ("square", "circle", "triangle")
_TEMPLATES = ("a {c} {s} on a {b} background", "a {c} {s} in front of a {b} wall",
              "the {s} is {c} and the background is {b}", "a large {c} {s}",
              "{c} {s} on {b}")


def _coco_image(rng: random.Random, width: int, height: int) -> tuple[Any, list[str]]:
    from PIL import Image, ImageDraw

    colour, background = rng.sample(sorted(_COLOURS), 2)
    shape = rng.choice(_SHAPES)
    image = Image.new("RGB", (width, height), _COLOURS[background])
    draw = ImageDraw.Draw(image)
    x0, y0 = rng.randint(2, width // 3), rng.randint(2, height // 3)
    x1, y1 = rng.randint(2 * width // 3, width - 2), rng.randint(2 * height // 3, height - 2)
    if shape == "square":
        draw.rectangle((x0, y0, x1, y1), fill=_COLOURS[colour])
    elif shape == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=_COLOURS[colour])
    else:
        draw.polygon(((x0, y1), (x1, y1), ((x0 + x1) // 2, y0)), fill=_COLOURS[colour])
    captions = [t.format(c=colour, s=shape, b=background) for t in _TEMPLATES]
    rng.shuffle(captions)
    return image, [c.capitalize() + ("." if i % 2 else "") for i, c in enumerate(captions)]


def _coco_file_name(year: str, split: str, image_id: int) -> str:
    return f"COCO_{split}{year}_{image_id:012d}.jpg" if year == "2014" else f"{image_id:012d}.jpg"


def write_coco(folder: Path, *, year: str = "2017", n_train: int = 160, n_val: int = 32,
               seed: int = 0, layout: str = "folders") -> Path:
    """COCO-style caption data in ``folder`` (the dataset folder ``coco-<year>``).

    ``layout="folders"`` writes ``annotations/captions_{train,val}<year>.json`` and
    ``{train,val}<year>/`` image folders; ``layout="zips"`` writes COCO's archives
    ``annotations_trainval<year>.zip`` and ``{train,val}<year>.zip`` instead.
    """
    if layout not in ("folders", "zips"):
        raise ValueError("layout is 'folders' or 'zips'")
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    next_ann = 1
    for split, n, first_id in (("train", n_train, 100), ("val", n_val, 900000)):
        images, annotations = [], []
        for k in range(n):
            image_id = first_id + 7 * k
            width, height = rng.choice([(64, 48), (48, 64), (64, 64), (80, 60)])
            image, captions = _coco_image(rng, width, height)
            name = _coco_file_name(year, split, image_id)
            buf = io.BytesIO()
            image.save(buf, format="JPEG", quality=90)
            files[f"{split}{year}/{name}"] = buf.getvalue()
            images.append({"license": 1, "file_name": name, "coco_url": "", "height": height,
                           "width": width, "date_captured": "2013-11-14 11:18:45",
                           "flickr_url": "", "id": image_id})
            for caption in captions:
                annotations.append({"image_id": image_id, "id": next_ann, "caption": caption})
                next_ann += 1
        body = {"info": {"description": "rgym COCO fixture", "year": int(year)},
                "licenses": [{"id": 1, "name": "fixture", "url": ""}],
                "images": images, "annotations": annotations}
        files[f"annotations/captions_{split}{year}.json"] = json.dumps(body).encode()
    if layout == "folders":
        for rel, data in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
        return folder
    groups = {f"annotations_trainval{year}.zip": "annotations/", f"train{year}.zip": f"train{year}/",
              f"val{year}.zip": f"val{year}/"}
    for archive, prefix in groups.items():
        with zipfile.ZipFile(folder / archive, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr(zipfile.ZipInfo(prefix, date_time=(2017, 1, 1, 0, 0, 0)), b"")
            for rel, data in sorted(files.items()):
                if rel.startswith(prefix):
                    zf.writestr(zipfile.ZipInfo(rel, date_time=(2017, 1, 1, 0, 0, 0)), data)
    return folder


def write_resnet50(folder: Path, seed: int = 0) -> Path:
    """A random-init ResNet-50 state dict saved as ``folder/resnet50-0676ba61.pth``."""
    from rgym_task_vision.weights import save_random_resnet50

    return save_random_resnet50(folder / "resnet50-0676ba61.pth", seed)


# ----------------------------------------------------------------------------- specs


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def fixture_spec(base: DatasetSpec, folder: Path, *, options: dict[str, Any] | None = None
                 ) -> DatasetSpec:
    """``base`` renamed ``vision-fixture/<name>``, reading the data folder's
    ``<name>/`` sub-folder (the real dataset's folder name), with the checksums
    of the fixture files found in ``folder`` (decompressed for ``.gz`` files)."""
    from rgym_task_vision import sources

    name = sources.folder_name(base)
    checksums = {}
    for raw in base.checksums:
        path = sources.find_file(base, folder, raw)
        if path is not None:
            checksums[raw] = sources.sha256_of(path, decompress=path.name.endswith(".gz")
                                               and not raw.endswith(".gz"))
        else:  # COCO's extracted form: the archive's checksum is never used
            checksums[raw] = base.checksums[raw]
    merged = {**base.options, "folder": name, **(options or {})}
    merged.pop("fallback_paths", None)
    return attrs.evolve(base, id=f"{FIXTURE_NAMESPACE}/{name}", path=None, checksums=checksums,
                        options=merged, description=f"rgym fixture of {base.id}", root=None)


def install_fixture_datasets(site: Path, specs: Iterable[DatasetSpec]) -> dict[str, str]:
    """Make ``specs`` discoverable by rgym through a throwaway plugin in ``site``
    (:func:`rgym_core.testing.install_dataset_plugin`); returns the environment to
    add (``PYTHONPATH`` with ``site``)."""
    from rgym_core.testing import install_dataset_plugin

    return install_dataset_plugin(site, specs, name="vision-fixtures")


def write_all(root: Path, *, coco_layout: str = "folders") -> tuple[Path, dict[str, str]]:
    """Fixture data for every dataset of the pack under ``root/data`` and their
    specs registered from ``root/site``; returns the data folder and the env."""
    from rgym_core import load_dataset

    here = Path(__file__).parent / "datasets"
    data = root / "data"
    write_fashion_mnist(data / "fashion-mnist")
    write_cifar10_tarball(data / "cifar10" / "cifar-10-python.tar.gz")
    write_coco(data / "coco-2017", layout=coco_layout)
    write_resnet50(data / "resnet50-imagenet")
    small = {"split": {"train": 160, "val": 16, "test": 16, "seed": 42, "image_size": 64}}
    specs = [fixture_spec(load_dataset(here / "fashion-mnist.yaml"), data / "fashion-mnist"),
             fixture_spec(load_dataset(here / "cifar10.yaml"), data / "cifar10"),
             fixture_spec(load_dataset(here / "coco-2017.yaml"), data / "coco-2017", options=small),
             fixture_spec(load_dataset(here / "resnet50-imagenet.yaml"), data / "resnet50-imagenet")]
    return data, install_fixture_datasets(root / "site", specs)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rgym_task_vision.fixtures DIR", file=sys.stderr)
        return 2
    data, env = write_all(Path(args[0]).resolve())
    print(f"fixture data in {data}; to run on it:\n"
          f"  export PYTHONPATH={env['PYTHONPATH']}\n"
          f"  rgym run mlgym/cifar10 --agent baseline --data-dir {data} "
          f"--dataset data={FIXTURE_NAMESPACE}/cifar10\n"
          f"  rgym run mlgym/coco-captioning --agent baseline --data-dir {data} "
          f"--dataset data={FIXTURE_NAMESPACE}/coco-2017 "
          f"--dataset pretrained={FIXTURE_NAMESPACE}/resnet50-imagenet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Converting the users' files once: what the agent and the grader get, the
cache, and every bad-input error (naming the file, the checksum, the source)."""

from __future__ import annotations

import csv
import json
import logging
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from rgym_task_vision import fixtures, prepare
from vision_testlib import load_spec

from rgym_core.dataset_cache import MANIFEST, problems
from rgym_core.datasets import DatasetError

SMALL_COCO = {"split": {"train": 20, "val": 6, "test": 6, "seed": 42, "image_size": 32}}


def _fashion(tmp_path: Path):
    data = tmp_path / "data"
    fixtures.write_fashion_mnist(data / "fashion-mnist", n_train=64, n_test=16)
    return data, fixtures.fixture_spec(load_spec("fashion-mnist"), data / "fashion-mnist")


def test_fashion_mnist_public_arrays_and_private_labels(tmp_path):
    data, spec = _fashion(tmp_path)
    prepared = prepare.prepare_fashion_mnist(spec, tmp_path / "cache", data)
    assert sorted(p.name for p in prepared.public.iterdir()) == [
        "README.md", "test_images.npy", "train_images.npy", "train_labels.npy"]
    assert np.load(prepared.public / "train_images.npy").shape == (64, 28, 28)
    assert np.load(prepared.public / "test_images.npy").shape == (16, 28, 28)
    with (prepared.private / "test_labels.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    truth = fixtures._class_images(16, 28, 1, 10, 1)[1]
    assert [int(r["label"]) for r in rows] == truth.tolist()
    assert [int(r["id"]) for r in rows] == list(range(16))
    assert "T-shirt/top" in (prepared.public / "README.md").read_text()


def test_converted_once_then_reused_without_raw_files(tmp_path):
    data, spec = _fashion(tmp_path)
    first = prepare.prepare_fashion_mnist(spec, tmp_path / "cache", data)
    shutil.rmtree(data)
    assert prepare.prepare_fashion_mnist(spec, tmp_path / "cache", None) == first
    manifest = json.loads((first.public.parent / MANIFEST).read_text())
    assert set(manifest["files"]) == {"private/test_labels.csv", "public/README.md",
                                      "public/test_images.npy", "public/train_images.npy",
                                      "public/train_labels.npy"}
    assert manifest["raw_sha256"] == spec.checksums


def test_damaged_cache_is_rebuilt_or_reported(tmp_path, caplog):
    data, spec = _fashion(tmp_path)
    prepared = prepare.prepare_fashion_mnist(spec, tmp_path / "cache", data)
    labels = prepared.private / "test_labels.csv"
    good = labels.read_text()
    labels.write_text(good.replace(",", ",9", 3))
    assert problems(prepared.public.parent)
    with caplog.at_level(logging.WARNING, logger="rgym.datasets"):
        again = prepare.prepare_fashion_mnist(spec, tmp_path / "cache", data)
    assert again == prepared and labels.read_text() == good
    assert "rebuilding the cached conversion of dataset 'vision-fixture/fashion-mnist'" in caplog.text
    (prepared.public / "extra.npy").write_bytes(b"x")
    shutil.rmtree(data)
    with pytest.raises(DatasetError) as err:
        prepare.prepare_fashion_mnist(spec, tmp_path / "cache", None)
    msg = str(err.value)
    assert "is damaged" in msg and "extra.npy: not in the manifest" in msg
    assert "t10k-images-idx3-ubyte: missing data file of dataset" in msg


def test_cifar_test_labels_reach_the_grader_only(tmp_path):
    data = tmp_path / "data"
    fixtures.write_cifar10_tarball(data / "cifar10" / "cifar-10-python.tar.gz", per_batch=10, n_test=12)
    spec = fixtures.fixture_spec(load_spec("cifar10"), data / "cifar10")
    prepared = prepare.prepare_cifar10(spec, tmp_path / "cache", data)
    public = {p.name for p in prepared.public.iterdir()}
    assert public == {"README.md", "test_images.npy", "train_images.npy", "train_labels.npy"}
    assert np.load(prepared.public / "train_images.npy").shape == (50, 32, 32, 3)
    assert np.load(prepared.public / "train_labels.npy").dtype == np.int64
    assert (prepared.private / "test_labels.csv").read_text().count("\n") == 13


def test_missing_cifar_tarball_names_checksum_and_source(tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(DatasetError) as err:
        prepare.prepare_cifar10(load_spec("cifar10"), tmp_path / "cache", tmp_path / "data")
    msg = str(err.value)
    assert "cifar-10-python.tar.gz: missing data file of dataset 'mlgym/cifar10'" in msg
    assert "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce" in msg
    assert "cs.toronto.edu" in msg and str(tmp_path / "data" / "cifar10") in msg


# ----------------------------------------------------------------------------- COCO


def _coco(tmp_path: Path, layout: str):
    folder = tmp_path / layout / "coco-2017"
    fixtures.write_coco(folder, n_train=24, n_val=12, layout=layout)
    return folder.parent, fixtures.fixture_spec(load_spec("coco-2017"), folder, options=SMALL_COCO)


def _public_tree(prepared) -> dict[str, bytes]:
    return {p.relative_to(prepared.public.parent).as_posix(): p.read_bytes()
            for p in sorted(prepared.public.parent.rglob("*"))
            if p.is_file() and p.name not in ("README.md", MANIFEST)}


def test_coco_folders_and_zips_convert_alike(tmp_path, caplog):
    data_f, spec_f = _coco(tmp_path, "folders")
    data_z, spec_z = _coco(tmp_path, "zips")
    assert spec_z.checksums != spec_f.checksums  # the archives' own digests
    with caplog.at_level(logging.WARNING, logger="rgym.datasets"):
        from_folders = prepare.prepare_coco(spec_f, tmp_path / "cache", data_f)
    assert "checked against the annotations only" in caplog.text
    from_zips = prepare.prepare_coco(spec_z, tmp_path / "cache", data_z)
    assert _public_tree(from_folders) == _public_tree(from_zips)
    readme = (from_zips.public / "README.md").read_text()
    assert "val2017.zip (SHA-256 verified)" in readme
    assert "(extracted; checked against the annotations)" in (from_folders.public / "README.md").read_text()
    rows = {n: [json.loads(x) for x in (from_zips.public / f"{n}.jsonl").read_text().splitlines()]
            for n in ("train", "val", "test")}
    assert [len(rows[n]) for n in ("train", "val", "test")] == [20, 6, 6]
    assert all(set(r) == {"image_id", "file_name"} for r in rows["test"])  # no captions shown
    assert all(len(r["captions"]) == 5 for r in rows["train"] + rows["val"])
    ids = [{r["image_id"] for r in rows[n]} for n in ("train", "val", "test")]
    assert not (ids[1] & ids[2]) and min(ids[1] | ids[2]) >= 900000  # val and test from val2017
    refs = [json.loads(x) for x in (from_zips.private / "test_references.jsonl").read_text().splitlines()]
    assert {r["image_id"] for r in refs} == ids[2] and all(len(r["captions"]) == 5 for r in refs)
    from PIL import Image

    with Image.open(from_zips.public / rows["test"][0]["file_name"]) as image:
        assert image.size == (32, 32) and image.mode == "RGB"


def test_coco_archive_with_wrong_checksum(tmp_path):
    data, spec = _coco(tmp_path, "zips")
    archive = data / "coco-2017" / "val2017.zip"
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("val2017/extra.txt", "x")
    with pytest.raises(DatasetError) as err:
        prepare.prepare_coco(spec, tmp_path / "cache", data)
    msg = str(err.value)
    assert f"{archive}: corrupted or different data file 'val2017.zip'" in msg
    assert spec.checksums["val2017.zip"] in msg and "cocodataset.org" in msg


def test_coco_missing_image_bad_image_and_bad_annotations(tmp_path):
    data, spec = _coco(tmp_path, "folders")
    folder = data / "coco-2017"
    captions = json.loads((folder / "annotations" / "captions_val2017.json").read_text())
    victim = folder / "val2017" / captions["images"][0]["file_name"]
    victim.unlink()
    with pytest.raises(DatasetError, match=f"{victim}: missing"):
        prepare.prepare_coco(spec, tmp_path / "c1", data)
    victim.write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(DatasetError, match=f"{victim}: cannot be decoded as an image"):
        prepare.prepare_coco(spec, tmp_path / "c2", data)
    from PIL import Image

    Image.new("RGB", (5, 7)).save(victim, format="JPEG")
    with pytest.raises(DatasetError, match="is 5x7 but the annotations say"):
        prepare.prepare_coco(spec, tmp_path / "c3", data)
    (folder / "annotations" / "captions_val2017.json").write_text('{"images": []}')
    with pytest.raises(DatasetError, match="not a COCO captions file"):
        prepare.prepare_coco(spec, tmp_path / "c4", data)


def test_coco_nothing_there_names_both_forms(tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(DatasetError) as err:
        prepare.prepare_coco(load_spec("coco-2014"), tmp_path / "cache", tmp_path / "data")
    msg = str(err.value)
    assert msg.startswith("annotations_trainval2014.zip: missing data of dataset 'mlgym/coco-2014'")
    assert "031296bbc80c45a1d1f76bf9a90ead27e94e99ec629208449507a4917a3bf009" in msg
    assert "annotations/captions_train2014.json" in msg and "cocodataset.org" in msg


def test_replacing_an_extracted_coco_folder_is_a_new_conversion(tmp_path):
    data, spec = _coco(tmp_path, "folders")
    first = prepare.prepare_coco(spec, tmp_path / "cache", data)
    shutil.rmtree(data / "coco-2017")
    fixtures.write_coco(data / "coco-2017", n_train=24, n_val=12, seed=5)
    second = prepare.prepare_coco(spec, tmp_path / "cache", data)
    assert second.public != first.public


# ----------------------------------------------------------------------------- ResNet-50


def test_resnet_weights_verified_and_checked_to_load(fixture_data, tmp_path):
    folder = fixture_data.data / "resnet50-imagenet"
    spec = fixtures.fixture_spec(load_spec("resnet50-imagenet"), folder)
    prepared = prepare.prepare_resnet50(spec, tmp_path / "cache", fixture_data.data)
    assert [p.name for p in prepared.public.iterdir()] == ["resnet50-0676ba61.pth"]
    bad_data = tmp_path / "bad"
    (bad_data / "resnet50-imagenet").mkdir(parents=True)
    bad = bad_data / "resnet50-imagenet" / "resnet50-0676ba61.pth"
    bad.write_bytes(b"not a checkpoint")
    bad_spec = fixtures.fixture_spec(load_spec("resnet50-imagenet"), bad.parent)  # digest matches
    with pytest.raises(DatasetError, match="the weights file does not load"):
        prepare.prepare_resnet50(bad_spec, tmp_path / "cache2", bad_data)
    with pytest.raises(DatasetError) as err:  # the real spec: a checksum mismatch first
        prepare.prepare_resnet50(load_spec("resnet50-imagenet"), tmp_path / "cache3", bad_data)
    assert "0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a" in str(err.value)

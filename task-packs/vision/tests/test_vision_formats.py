"""The readers of the users' formats, the checksum rules and BLEU, on small files."""

from __future__ import annotations

import gzip
import importlib.util
import io
import math
import pickle
import shutil
import tarfile
from pathlib import Path

import attrs
import numpy as np
import pytest
from rgym_task_vision import fixtures, formats, sources
from vision_testlib import TASKS, load_spec

from rgym_core.datasets import DatasetError


def _starter_bleu():
    """The starter's bleu.py (which the grader includes), under a name of its own."""
    spec = importlib.util.spec_from_file_location(
        "rgym_vision_test_bleu", TASKS / "coco-captioning" / "starter" / "bleu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bleu = _starter_bleu()

# ----------------------------------------------------------------------------- IDX and checksums


def test_idx_reads_gzip_and_plain_alike(tmp_path):
    fixtures.write_fashion_mnist(tmp_path / "gz", n_train=50, n_test=20)
    fixtures.write_fashion_mnist(tmp_path / "plain", n_train=50, n_test=20, compress=False)
    a = formats.read_idx(tmp_path / "gz" / "train-images-idx3-ubyte.gz")
    b = formats.read_idx(tmp_path / "plain" / "train-images-idx3-ubyte")
    assert a.shape == (50, 28, 28) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    labels = formats.read_idx(tmp_path / "plain" / "t10k-labels-idx1-ubyte")
    assert labels.shape == (20,) and labels.max() <= 9


@pytest.mark.parametrize("damage, message", [
    (lambda b: b"\x08\x08" + b[2:], "not an IDX file"),
    (lambda b: b[:-10], "but the file holds"),
])
def test_idx_structure_errors(tmp_path, damage, message):
    fixtures.write_fashion_mnist(tmp_path, n_train=10, n_test=5, compress=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DatasetError, match=message) as err:
        formats.read_idx(path)
    assert str(path) in str(err.value)


def test_checksum_is_of_the_decompressed_bytes(tmp_path):
    """One digest verifies Debian's re-gzipped file, another gzip of it and the
    extracted file (torchvision's raw/ folder keeps both)."""
    fixtures.write_fashion_mnist(tmp_path / "a", n_train=30, n_test=10, compress=False)
    name = "train-labels-idx1-ubyte"
    raw = (tmp_path / "a" / name).read_bytes()
    spec = attrs.evolve(load_spec("fashion-mnist"),
                        checksums={name: sources.sha256_of(tmp_path / "a" / name)})
    for level, folder in ((1, "b"), (9, "c")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{name}.gz").write_bytes(gzip.compress(raw, compresslevel=level))
        sources.verify_file(spec, tmp_path / folder / f"{name}.gz", name)
    assert (tmp_path / "b" / f"{name}.gz").read_bytes() != (tmp_path / "c" / f"{name}.gz").read_bytes()
    sources.verify_file(spec, tmp_path / "a" / name, name)


def test_real_fashion_mnist_checksums_match_debian_files():
    spec = load_spec("fashion-mnist")
    folder = Path(spec.path)
    if not folder.is_dir():
        pytest.skip(f"{folder} absent: apt-get install dataset-fashion-mnist")
    for name in spec.checksums:
        path = sources.find_file(spec, folder, name)
        assert path is not None and path.name == f"{name}.gz"
        sources.verify_file(spec, path, name)


def test_corrupted_and_missing_files_are_named_with_checksum_and_source(tmp_path):
    spec = load_spec("fashion-mnist")
    spec = attrs.evolve(spec, path=None)
    data = tmp_path / "data"
    fixtures.write_fashion_mnist(data / "fashion-mnist", n_train=10, n_test=5)
    with pytest.raises(DatasetError) as err:
        sources.locate_verified(spec, data)
    msg = str(err.value)
    assert "fashion-mnist" in msg and "corrupted or different data file" in msg
    assert "decompressed content" in msg and "dataset-fashion-mnist" in msg
    assert any(v in msg for v in spec.checksums.values())
    (data / "fashion-mnist" / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(DatasetError) as err:
        sources.locate_verified(spec, data, ["t10k-images-idx3-ubyte"])
    msg = str(err.value)
    assert msg.startswith("t10k-images-idx3-ubyte: missing data file of dataset 'mlgym/fashion-mnist'")
    assert spec.checksums["t10k-images-idx3-ubyte"] in msg and "of the decompressed bytes" in msg
    assert str(data / "fashion-mnist") in msg and "FashionMNIST/raw/t10k-images-idx3-ubyte.gz" in msg
    assert "apt-get install dataset-fashion-mnist" in msg and "--data-dir" in msg


def test_torchvision_raw_layout_is_found(tmp_path):
    spec = load_spec("fashion-mnist")
    fixtures.write_fashion_mnist(tmp_path / "fashion-mnist" / "FashionMNIST" / "raw", n_train=10,
                                 n_test=5, compress=False)
    path = sources.find_file(spec, tmp_path / "fashion-mnist", "train-images-idx3-ubyte")
    assert path == tmp_path / "fashion-mnist" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte"


def test_data_dir_that_does_not_exist_is_reported(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        sources.locate_verified(load_spec("cifar10"), tmp_path / "nope")


# ----------------------------------------------------------------------------- CIFAR-10


def test_cifar_tarball_is_read_in_place(tmp_path):
    path = fixtures.write_cifar10_tarball(tmp_path / "cifar-10-python.tar.gz", per_batch=20, n_test=30)
    data = formats.read_cifar10_tarball(path)
    assert data["train_images"].shape == (100, 32, 32, 3) and data["train_images"].dtype == np.uint8
    assert data["test_images"].shape == (30, 32, 32, 3) and data["test_labels"].shape == (30,)
    assert data["label_names"][0] == "airplane" and len(data["label_names"]) == 10
    # channels last: the red plane of the pickled row-major (3, 32, 32) data is [..., 0]
    with tarfile.open(path) as tar:
        fh = tar.extractfile("cifar-10-batches-py/test_batch")
        batch = pickle.load(fh, encoding="bytes")
    assert np.array_equal(data["test_images"][3, :, :, 0], batch[b"data"][3, :1024].reshape(32, 32))
    assert data["test_labels"].tolist() == batch[b"labels"]  # the test batch's order is kept


class _Exploit:
    def __reduce__(self):
        return (shutil.rmtree, ("/nonexistent-rgym-test",))


def test_cifar_pickles_cannot_run_code(tmp_path):
    path = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name in [*formats.CIFAR_TRAIN, formats.CIFAR_TEST, formats.CIFAR_META]:
            data = pickle.dumps({b"data": _Exploit(), b"labels": []}, protocol=2)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DatasetError, match="refusing to load shutil.rmtree"):
        formats.read_cifar10_tarball(path)


def test_cifar_archive_errors_name_the_file(tmp_path):
    path = tmp_path / "cifar-10-python.tar.gz"
    path.write_bytes(b"not a tarball")
    with pytest.raises(DatasetError, match=r"not a readable \.tar\.gz archive") as err:
        formats.read_cifar10_tarball(path)
    assert str(path) in str(err.value)
    with tarfile.open(path, "w:gz"):
        pass
    with pytest.raises(DatasetError, match="the archive lacks batches.meta, data_batch_1"):
        formats.read_cifar10_tarball(path)


# ----------------------------------------------------------------------------- BLEU


def test_bleu_hand_computed():
    hyp = bleu.tokenize("The cat sat on the mat.")
    ref = bleu.tokenize("the cat is on the mat")
    assert hyp == ["the", "cat", "sat", "on", "the", "mat"]
    # clipped precisions 5/6, 3/5, 1/4, 0/3; equal lengths: no brevity penalty
    assert bleu.corpus_bleu([hyp], [[ref]], 1) == pytest.approx(5 / 6)
    assert bleu.corpus_bleu([hyp], [[ref]], 3) == pytest.approx(0.5)
    assert bleu.corpus_bleu([hyp], [[ref]], 4) == 0.0
    assert bleu.corpus_bleu([ref], [[ref]], 4) == pytest.approx(1.0)
    # brevity penalty exp(1 - r/c) with r = 6, c = 2
    assert bleu.corpus_bleu([["the", "cat"]], [[ref]], 1) == pytest.approx(math.exp(-2))
    # the closest reference length wins, the shorter one on a tie (3 and 5 for 4)
    four = ["a", "b", "c", "d"]
    assert bleu.corpus_bleu([four], [[["a", "b", "c"], ["a", "b", "c", "d", "e"]]], 1) == 1.0
    # clipping by the most in any one reference
    assert bleu.corpus_bleu([["a", "a", "a"]], [[["a", "a"], ["a", "b", "c"]]], 1) == pytest.approx(2 / 3)


def test_bleu_is_corpus_level_and_tokenisation_drops_punctuation_and_case():
    assert bleu.tokenize("A dog's toy, ON the bed!") == ["a", "dog's", "toy", "on", "the", "bed"]
    hyps = [bleu.tokenize("a dog on a bed"), bleu.tokenize("two cats")]
    refs = [[bleu.tokenize("a dog on a bed")], [bleu.tokenize("two cats sleeping")]]
    corpus = bleu.corpus_bleu(hyps, refs, 4)
    assert 0 < corpus < 1  # the second sentence has no 4-gram: sentence BLEU would be 0
    assert bleu.sentence_bleu(hyps[1], refs[1]) == 0.0
    scores = bleu.scores(hyps, refs)
    assert set(scores) == {"bleu4", "bleu1", "char_bleu"} and scores["bleu4"] == corpus
    assert bleu.char_bleu([bleu.tokenize("a dog")], [[bleu.tokenize("A dog.")]]) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- ResNet-50


def test_resnet50_matches_torchvision_layout(tmp_path):
    from rgym_task_vision.weights import resnet_module

    model = resnet_module().resnet50()
    state = model.state_dict()
    # torchvision's resnet50: 320 state-dict entries, 25,557,032 parameters
    assert len(state) == 320 and sum(p.numel() for p in model.parameters()) == 25_557_032
    assert "layer1.0.downsample.0.weight" in state and "fc.weight" in state
    assert state["layer2.0.conv2.weight"].shape == (128, 128, 3, 3)  # v1.5: stride on the 3x3


def test_weights_that_do_not_load_are_reported(tmp_path):
    import torch
    from rgym_task_vision.weights import check_resnet50_state_dict, resnet_module

    bad = tmp_path / "resnet50-0676ba61.pth"
    bad.write_bytes(b"PK\x03\x04 garbage")
    with pytest.raises(DatasetError, match="does not load as a PyTorch state dict") as err:
        check_resnet50_state_dict(bad)
    assert str(bad) in str(err.value)
    state = resnet_module().resnet50().state_dict()
    del state["fc.bias"]
    state["conv1.weight"] = torch.zeros(3, 3)
    torch.save(state, bad)
    with pytest.raises(DatasetError, match="do not fit ResNet-50") as err:
        check_resnet50_state_dict(bad)
    assert "fc.bias" in str(err.value) and "conv1.weight" in str(err.value)
    torch.save([1, 2, 3], bad)
    with pytest.raises(DatasetError, match="holds a list, not a state dict"):
        check_resnet50_state_dict(bad)

"""The data formats and the datasets' preparation: token shards, GPT-2 BPE
offline, MultiNLI's zip, the BERT folder; clear errors for bad files."""

from __future__ import annotations

import json
import struct
import zipfile

import pytest
from language_testlib import load_spec
from rgym_task_language import fixtures, formats, prepare

from rgym_core.datasets import DatasetError


def test_gpt2_bpe_offline_matches_gpt2():
    from language_testlib import require_gpt2_bpe

    require_gpt2_bpe()
    from rgym_task_language.gpt2 import encoding

    enc = encoding()
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257 and enc.eot_token == 50256


def test_shard_round_trip_and_header(tmp_path):
    path = formats.write_shard(tmp_path / "s.bin", [50256, 15496, 995, 0, 65535])
    raw = path.read_bytes()
    assert struct.unpack("<3i", raw[:12]) == (20240520, 1, 5) and len(raw) == 1024 + 10
    assert formats.read_shard(path).tolist() == [50256, 15496, 995, 0, 65535]


@pytest.mark.parametrize("damage,message", [
    (lambda b: b[:-2], "damaged or truncated token shard: the header says 3 tokens"),
    (lambda b: struct.pack("<i", 7) + b[4:], "header magic 7, expected 20240520"),
    (lambda b: b[:4] + struct.pack("<i", 2) + b[8:], "token shard version 2"),
    (lambda b: b[:100], "shorter than the 1024-byte header"),
])
def test_bad_shards_are_named(tmp_path, damage, message):
    path = formats.write_shard(tmp_path / "fineweb_val_000000.bin", [1, 2, 3])
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DatasetError, match="fineweb_val_000000.bin: .*" + message.split(":")[0]):
        formats.shard_token_count(path)


def test_prepare_fineweb_hides_the_validation_shard(tmp_path, fixture_data):
    spec = fixtures.fixture_spec(load_spec("fineweb10B"), fixture_data.data / "fineweb10B")
    ready = prepare.prepare_fineweb(spec, tmp_path / "cache", fixture_data.data)
    assert sorted(p.name for p in ready.public.iterdir()) == [
        "README.md", "fineweb_train_000001.bin", "fineweb_train_000002.bin"]
    assert [p.name for p in ready.private.iterdir()] == ["fineweb_val_000000.bin"]
    assert "27,252" not in (ready.public / "README.md").read_text()  # val size stays private


def test_fineweb_checksum_and_missing_shard(tmp_path, fixture_data):
    data = fixture_data.copy_of("fineweb10B", tmp_path / "data")
    spec = fixtures.fixture_spec(load_spec("fineweb10B"), data / "fineweb10B")
    val = data / "fineweb10B" / "fineweb_val_000000.bin"
    raw = bytearray(val.read_bytes())
    raw[-1] ^= 1
    val.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match="corrupted or different data file 'fineweb_val_000000.bin'"):
        prepare.prepare_fineweb(spec, tmp_path / "cache", data)
    val.unlink()
    with pytest.raises(DatasetError) as err:
        prepare.prepare_fineweb(load_spec("fineweb10B"), tmp_path / "cache", data)
    assert "fineweb_val_000000.bin: missing data file of dataset 'mlgym/fineweb10B'" in str(err.value)
    assert "cached_fineweb10B.py" in str(err.value)


def test_prepare_mnli_keeps_labels_private(tmp_path, fixture_data):
    spec = fixtures.fixture_spec(load_spec("mnli"), fixture_data.data / "mnli")
    ready = prepare.prepare_mnli(spec, tmp_path / "cache", fixture_data.data)
    val = [json.loads(line) for line in (ready.public / "validation_matched.jsonl").open()]
    train = [json.loads(line) for line in (ready.public / "train.jsonl").open()]
    assert len(val) == 196 and len(train) == 784  # pairs without a gold label dropped
    assert "label" not in val[0] and set(train[0]) == {"pairID", "genre", "premise", "hypothesis", "label"}
    labels = (ready.private / "validation_matched_labels.csv").read_text().splitlines()
    assert labels[0] == "idx,label" and len(labels) == 197


def test_mnli_zip_checked_and_missing_named(tmp_path, fixture_data):
    with pytest.raises(DatasetError) as err:
        prepare.prepare_mnli(load_spec("mnli"), tmp_path / "cache", tmp_path)
    text = str(err.value)
    assert "multinli_1.0.zip: missing data file of dataset 'mlgym/mnli'" in text
    assert "049f507b9e36b1fcb756cfd5aeb3b7a0cfcb84bf023793652987f7e7e0957822" in text
    data = fixture_data.copy_of("mnli", tmp_path / "data")
    with pytest.raises(DatasetError, match="corrupted or different data file 'multinli_1.0.zip'"):
        prepare.prepare_mnli(load_spec("mnli"), tmp_path / "cache", data)
    bad = tmp_path / "bad" / "mnli" / "multinli_1.0.zip"
    bad.parent.mkdir(parents=True)
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("multinli_1.0/multinli_1.0_train.jsonl", '{"gold_label": "maybe"}\n')
    spec = fixtures.fixture_spec(load_spec("mnli"), bad.parent)
    with pytest.raises(DatasetError, match="line 1: not a MultiNLI record"):
        prepare.prepare_mnli(spec, tmp_path / "cache", tmp_path / "bad")


def test_bert_folder_checked(tmp_path, fixture_data):
    real = load_spec("bert-base-uncased")
    # the fixture is not bert-base sized: the real spec refuses it, naming the field
    with pytest.raises(DatasetError, match="hidden_size is 32, expected 768"):
        prepare.prepare_bert(real, tmp_path / "cache", fixture_data.data)
    spec = fixtures.fixture_spec(real, fixture_data.data / "bert-base-uncased",
                                 options={"expect": {"model_type": "bert"}})
    ready = prepare.prepare_bert(spec, tmp_path / "cache", fixture_data.data)
    assert {"config.json", "model.safetensors", "vocab.txt"} <= {p.name for p in ready.public.iterdir()}
    assert all(p.stat().st_mode & 0o004 for p in ready.public.iterdir())  # sandbox users read them
    data = fixture_data.copy_of("bert-base-uncased", tmp_path / "data")
    (data / "bert-base-uncased" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(DatasetError, match="the BERT weights do not load"):
        prepare.prepare_bert(spec, tmp_path / "cache2", data)


def test_mnli_extracted_jsonl_files_give_the_same_data(tmp_path, fixture_data):
    zipped = fixtures.fixture_spec(load_spec("mnli"), fixture_data.data / "mnli")
    from_zip = prepare.prepare_mnli(zipped, tmp_path / "cache", fixture_data.data)
    data = tmp_path / "data"
    with zipfile.ZipFile(fixture_data.data / "mnli" / "multinli_1.0.zip") as zf:
        zf.extractall(data / "mnli")  # multinli_1.0/multinli_1.0_*.jsonl
    spec = fixtures.fixture_spec(load_spec("mnli"), data / "mnli",
                                 options={"extracted_lines": {"train": 800, "validation_matched": 200}})
    ready = prepare.prepare_mnli(spec, tmp_path / "cache", data)
    for name in ("train.jsonl", "validation_matched.jsonl"):
        assert (ready.public / name).read_bytes() == (from_zip.public / name).read_bytes()
    assert "extracted jsonl files" in (ready.public / "README.md").read_text()
    dev = data / "mnli" / "multinli_1.0" / "multinli_1.0_dev_matched.jsonl"
    dev.write_text("\n".join(dev.read_text().splitlines()[:-5]) + "\n")
    with pytest.raises(DatasetError, match="195 records, expected 200"):
        prepare.prepare_mnli(spec, tmp_path / "cache2", data)

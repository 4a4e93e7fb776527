"""Reuse of verified cached preparations: a split prepared once with the raw
files is reused without ``--data-dir`` and without network; a damaged cache is
rebuilt from the raw files or reported; a data folder that does not exist is
reported as such.

Every test uses its own cache folder.  Downloads are pointed at a loopback port
that refuses connections (proxy variables), so a test that falls back to
downloading fails instead of reaching the network.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from rgym_task_tabular import prepare
from rgym_task_tabular.datasource import (
    MANIFEST,
    build_folder,
    cache_key,
    prepare_cached,
    verify_build,
)

from rgym_core.datasets import DatasetError, sha256_file
from rgym_core.packs import load_dataset, load_task

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_tabular" / "tasks"
DATASETS = PACK / "rgym_task_tabular" / "datasets"
REPO = PACK.parents[1]
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", REPO.parent / "shared" / "data"))
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

needs_data = pytest.mark.skipif(
    not ((DATA / "house-price" / "ames_train.csv").is_file()
         and (DATA / "titanic" / "train.csv").is_file()),
    reason=f"real data absent under {DATA} (set RGYM_TEST_DATA_DIR)")

PREPARE = {"house-price": prepare.prepare_house_price, "titanic": prepare.prepare_titanic}


def spec_of(name: str):
    return load_dataset(DATASETS / f"{name}.yaml")


@pytest.fixture
def offline(monkeypatch):
    """Proxy variables pointing at a bound, non-listening loopback socket:
    any download is refused at once.  Returns the environment for subprocesses."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for var in PROXY_VARS:
        monkeypatch.setenv(var, proxy)
    for var in ("NO_PROXY", "no_proxy", "RGYM_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    yield dict(os.environ)
    sock.close()


# ----------------------------------------------------------------------------- cache key


def test_cache_key_follows_raw_checksums_version_and_params():
    spec = spec_of("titanic")
    base = cache_key(spec, "v1", {"seed": 42})
    assert cache_key(spec, "v1", {"seed": 42}) == base
    assert cache_key(spec, "v1", {"seed": 43}) != base
    assert cache_key(spec, "v2", {"seed": 42}) != base
    other = attrs.evolve(spec, checksums={**spec.checksums, "train.csv": "0" * 64})
    assert cache_key(other, "v1", {"seed": 42}) != base


# ----------------------------------------------------------------------------- reuse


@needs_data
@pytest.mark.parametrize("name", ["house-price", "titanic"])
def test_prepared_once_then_reused_without_data_dir_or_network(tmp_path, offline, name):
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match=r"has no prepared copy in the cache .* download failed"):
        PREPARE[name](spec_of(name), cache, None)  # nothing cached yet, network refused
    first = PREPARE[name](spec_of(name), cache, DATA)
    manifest = json.loads((first.public.parent / MANIFEST).read_text())
    assert manifest["raw_sha256"] == spec_of(name).checksums
    assert set(manifest["files"]) == {f"{p.parent.name}/{p.name}" for p in
                                      [*first.public.iterdir(), *first.private.iterdir()]}
    assert PREPARE[name](spec_of(name), cache, None) == first


@needs_data
@pytest.mark.parametrize("damage", ["change", "delete", "add", "manifest"])
def test_damaged_cache_is_rebuilt_from_raw_files(tmp_path, caplog, damage):
    spec, cache = spec_of("titanic"), tmp_path / "cache"
    prepared = prepare.prepare_titanic(spec, cache, DATA)
    answer = prepared.private / "ground_truth.csv"
    good = sha256_file(answer)
    if damage == "change":
        answer.write_text("PassengerId,Survived\n892,1\n")
    elif damage == "delete":
        answer.unlink()
    elif damage == "add":
        (prepared.public / "leak.csv").write_text("PassengerId,Survived\n892,1\n")
    else:
        (prepared.public.parent / MANIFEST).write_text("{")
    assert verify_build(prepared.public.parent) != []
    with caplog.at_level(logging.WARNING, logger="rgym.datasets"):
        again = prepare.prepare_titanic(spec, cache, DATA)
    assert again == prepared
    assert "rebuilding the cached preparation of dataset 'mlgym/titanic'" in caplog.text
    assert sha256_file(answer) == good and not (prepared.public / "leak.csv").exists()
    assert verify_build(prepared.public.parent) == []


@needs_data
def test_damaged_cache_without_raw_files_is_reported(tmp_path, offline):
    spec, cache = spec_of("house-price"), tmp_path / "cache"
    prepared = prepare.prepare_house_price(spec, cache, DATA)
    train = prepared.public / "train.csv"
    train.write_text(train.read_text().replace("Pave", "Grvl", 1))
    with pytest.raises(DatasetError) as err:
        prepare.prepare_house_price(spec, cache, None)
    msg = str(err.value)
    assert f"{prepared.public.parent}: the cached preparation of dataset 'mlgym/house-price' is " \
           f"damaged ({train}: changed (expected sha256 " in msg
    assert "cannot be rebuilt because the raw files are not available" in msg
    assert "--data-dir" in msg and "ames_train.csv" in msg
    assert train.is_file()  # nothing is deleted before a rebuild is possible


def test_verified_entry_is_reused_without_reading_raw_files(tmp_path):
    spec = spec_of("titanic")
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in spec.checksums:
        (raw / name).write_text(name)
    spec = attrs.evolve(spec, checksums={n: sha256_file(raw / n) for n in spec.checksums},
                        path=str(raw))

    def build(source: Path, dest: Path) -> None:
        (dest / "out.txt").write_text((source / "train.csv").read_text())

    out = prepare_cached(spec, tmp_path / "cache", None, "t1", build, {"k": 1})
    assert out == build_folder(spec, tmp_path / "cache", "t1", {"k": 1})
    assert (out / "out.txt").read_text() == "train.csv" and verify_build(out) == []
    (raw / "train.csv").write_text("other")  # raw files no longer match: reuse needs none
    assert prepare_cached(spec, tmp_path / "cache", None, "t1", build, {"k": 1}) == out


# ----------------------------------------------------------------------------- data folder


def test_nonexistent_data_dir_is_reported(tmp_path):
    missing = tmp_path / "nonexistent"
    with pytest.raises(DatasetError, match=rf"^{missing}: the data folder \(--data-dir or "
                                           rf"RGYM_DATA_DIR\) does not exist"):
        prepare.prepare_titanic(spec_of("titanic"), tmp_path / "cache", missing)
    (tmp_path / "file").write_text("")
    with pytest.raises(DatasetError, match="is not a folder"):
        prepare.prepare_house_price(spec_of("house-price"), tmp_path / "cache", tmp_path / "file")


def _rgym_run(task: str, runs: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", task, "--agent",
                           "scripted", "--runs-dir", str(runs), *extra],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def test_cli_reports_nonexistent_data_dir(tmp_path, offline):
    env = {**offline, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc = _rgym_run("mlgym/titanic", tmp_path / "runs", env, "--data-dir",
                     str(tmp_path / "nonexistent"))
    out = proc.stdout + proc.stderr
    assert f"{tmp_path / 'nonexistent'}: the data folder" in out and "does not exist" in out, out
    assert "download failed" not in out
    assert not list((tmp_path / "runs").rglob("result.json")) or \
        json.loads(next((tmp_path / "runs").rglob("result.json")).read_text())["status"] != "submitted"


@needs_data
@pytest.mark.parametrize("task", ["mlgym/titanic", "mlgym/house-price"])
def test_rgym_run_reuses_cache_without_data_dir(tmp_path, offline, task):
    env = {**offline, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    recorded = load_task(TASKS / task.split("/")[1]).baseline_scores
    for i, extra in enumerate([("--data-dir", str(DATA)), ()]):
        runs = tmp_path / f"runs{i}"
        proc = _rgym_run(task, runs, env, *extra)
        results = list(runs.rglob("result.json"))
        assert len(results) == 1, proc.stdout + proc.stderr
        result = json.loads(results[0].read_text())
        assert result["status"] == "submitted", (result.get("error"), proc.stderr[-2000:])
        assert result["final_scores"] == pytest.approx(recorded, rel=1e-6), extra

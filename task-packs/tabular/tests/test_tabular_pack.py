"""The tabular pack: data preparation (checksums, split, cache, download), the
hidden graders, the baselines on the real data, registration and check-pack.

Tests that need the real Kaggle files use ``RGYM_TEST_DATA_DIR`` or the shared
folder ``../shared/data`` next to the repository, and skip when they are absent.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import attrs
import pytest
from rgym_task_tabular import plugin, prepare
from rgym_task_tabular.datasource import cached_build, raw_files

from rgym_core.datasets import DatasetError
from rgym_core.grader_protocol import install_kit
from rgym_core.packs import load_dataset, load_task
from rgym_core.registry import load_registry

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_tabular" / "tasks"
DATASETS = PACK / "rgym_task_tabular" / "datasets"
REPO = PACK.parents[1]
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", REPO.parent / "shared" / "data"))
HOUSE_SHA = "1e18addf81e5e4d347cc17ee6075bbe4a42b7fa26b9e5b063e8f692a5f929d41"

needs_house = pytest.mark.skipif(
    not (DATA / "house-price" / "ames_train.csv").is_file(),
    reason=f"real data absent: {DATA}/house-price/ames_train.csv (set RGYM_TEST_DATA_DIR)")
needs_titanic = pytest.mark.skipif(
    not (DATA / "titanic" / "train.csv").is_file(),
    reason=f"real data absent: {DATA}/titanic/ (set RGYM_TEST_DATA_DIR)")


def house_spec():
    return load_dataset(DATASETS / "house-price.yaml")


def run_grader(task: str, submission_dir: Path, private: Path, tmp: Path) -> dict:
    """Run a hidden grader as the runner does (grader protocol), return its JSON."""
    root = tmp / "eval"
    shutil.copytree(TASKS / task / "grader", root / "grader")
    install_kit(root / "grader")
    shutil.copytree(private, root / "private" / "data")
    env = {**os.environ, "RGYM_SUBMISSION_DIR": str(submission_dir),
           "RGYM_GRADER_DIR": str(root / "grader"), "RGYM_DATA_DIR": str(root / "data"),
           "RGYM_PRIVATE_DIR": str(root / "private"), "RGYM_SCORES_FILE": str(root / "s.json"),
           "RGYM_GRADE_KIND": "validate", "RGYM_SEED": "0"}
    proc = subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((root / "s.json").read_text())
    shutil.rmtree(root)
    return data


# ----------------------------------------------------------------------------- graders


def _private(tmp: Path, name: str, text: str) -> Path:
    folder = tmp / "private"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("submission, expected", [
    (None, {"missing_submission": True}),
    ("Id,Price\n1,1\n", {"error": "submission.csv must have the columns Id,SalePrice; found Id,Price"}),
    ("Id,SalePrice\n1,100\n", {"error": "submission.csv has no prediction for 2 of the 3 test Ids "
                                        "(first: 2); predict every row of data/test.csv"}),
    ("Id,SalePrice\n1,100\n2,abc\n", {"error": "submission.csv line 3: SalePrice 'abc' is not a number"}),
    ("Id,SalePrice\n1,100\n2,200\n3,300\n", {"scores": {"r2": 1.0, "rmse": 0.0}}),
    ("Id,SalePrice\n1.0,200\n2,200\n3,200\n", {"scores": {"r2": 0.0, "rmse": (20000 / 3) ** 0.5}}),
])
def test_house_price_grader(tmp_path, submission, expected):
    private = _private(tmp_path, "answer.csv", "Id,SalePrice\n1,100\n2,200\n3,300\n")
    sub = tmp_path / "submission"
    sub.mkdir()
    if submission is not None:
        (sub / "submission.csv").write_text(submission)
    got = run_grader("house-price", sub, private, tmp_path)
    for key, value in expected.items():
        if key == "scores":
            assert got["scores"] == pytest.approx(value)
        else:
            assert got[key] == value
    assert ("error" in got) != ("scores" in got)


@pytest.mark.parametrize("submission, expected", [
    (None, {"missing_submission": True}),
    ("PassengerId,Survived\n1,1\n2,0\n3,2\n", {"error": "submission.csv line 4: Survived must be 0 or 1, got '2'"}),
    ("PassengerId,Survived\n1,1\n2,0\n3,1\n", {"scores": {"accuracy": 2 / 3}}),
])
def test_titanic_grader(tmp_path, submission, expected):
    private = _private(tmp_path, "ground_truth.csv", "PassengerId,Survived\n1,1\n2,0\n3,0\n")
    sub = tmp_path / "submission"
    sub.mkdir()
    if submission is not None:
        (sub / "submission.csv").write_text(submission)
    got = run_grader("titanic", sub, private, tmp_path)
    for key, value in expected.items():
        assert got[key] == (pytest.approx(value) if key == "scores" else value)


# ----------------------------------------------------------------------------- data


def test_missing_data_file_names_file_checksum_and_source(tmp_path):
    (tmp_path / "house-price").mkdir()
    with pytest.raises(DatasetError) as err:
        raw_files(house_spec(), tmp_path, tmp_path / "cache")
    msg = str(err.value)
    assert f"{tmp_path}/house-price/ames_train.csv: missing data file 'ames_train.csv'" in msg
    assert f"expected sha256 {HOUSE_SHA}" in msg
    assert "kaggle.com/c/house-prices-advanced-regression-techniques" in msg
    assert "--data-dir" in msg and "RGYM_DATA_DIR" in msg


def test_corrupted_data_file(tmp_path):
    (tmp_path / "house-price").mkdir()
    (tmp_path / "house-price" / "ames_train.csv").write_text("Id,SalePrice\n1,2\n")
    with pytest.raises(DatasetError, match=rf"corrupted data file 'ames_train.csv' of dataset "
                                           rf"'mlgym/house-price': expected sha256 {HOUSE_SHA}, got "):
        prepare.prepare_house_price(house_spec(), tmp_path / "cache", tmp_path)


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture
def file_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Files, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_by_url_with_checksum_then_cached(tmp_path, file_server):
    root, base = file_server
    body = b"a,b\n1,2\n"
    (root / "f.csv").write_bytes(body)
    spec = attrs.evolve(house_spec(), checksums={"f.csv": hashlib.sha256(body).hexdigest()},
                        options={"urls": {"f.csv": f"{base}/f.csv"}})
    (tmp_path / "nodata").mkdir()  # a data folder without this dataset: download
    folder = raw_files(spec, tmp_path / "nodata", tmp_path / "cache")
    assert (folder / "f.csv").read_bytes() == body
    (root / "f.csv").unlink()  # a second call uses the cache, not the server
    assert raw_files(spec, None, tmp_path / "cache") == folder


def test_download_with_wrong_checksum_is_refused(tmp_path, file_server):
    root, base = file_server
    (root / "f.csv").write_bytes(b"tampered\n")
    spec = attrs.evolve(house_spec(), checksums={"f.csv": "0" * 64},
                        options={"urls": {"f.csv": f"{base}/f.csv"}})
    with pytest.raises(DatasetError, match=r"does not match sha256 0{64}.*expected sha256 0{64}"):
        raw_files(spec, None, tmp_path / "cache")
    assert not (tmp_path / "cache" / "mlgym__house-price" / "raw" / "f.csv").exists()


def test_cached_build_runs_once_and_never_keeps_a_failed_build(tmp_path):
    calls = []

    def build(dest: Path) -> None:
        calls.append(dest)
        (dest / "x").write_text("1")

    spec = house_spec()
    a = cached_build(spec, tmp_path, "v1", build)
    b = cached_build(spec, tmp_path, "v1", build)
    assert a == b and len(calls) == 1 and (a / "x").read_text() == "1"
    assert cached_build(spec, tmp_path, "v2", build) != a

    def broken(dest: Path) -> None:
        (dest / "half").write_text("")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        cached_build(spec, tmp_path, "v3", broken)
    assert sorted(p.name for p in a.parent.iterdir() if p.name.startswith(("v3", ".build"))) == []


@needs_house
def test_house_price_split_matches_mlgym(tmp_path):
    import pandas as pd

    prepared = prepare.prepare_house_price(house_spec(), tmp_path / "cache", DATA)
    train = pd.read_csv(prepared.public / "train.csv")
    val = pd.read_csv(prepared.public / "validation.csv")
    test = pd.read_csv(prepared.public / "test.csv")
    answer = pd.read_csv(prepared.private / "answer.csv")
    assert (len(train), len(val), len(test)) == (1022, 146, 292)
    assert "SalePrice" not in test.columns and list(answer.columns) == ["Id", "SalePrice"]
    assert sorted(os.listdir(prepared.public)) == ["test.csv", "train.csv", "validation.csv"]
    ids = [set(train.Id), set(val.Id), set(test.Id)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert set(answer.Id) == ids[2] and len(ids[0] | ids[1] | ids[2]) == 1460
    # MLGym's split (train_test_split, seed 42) puts these rows first
    assert test.Id.head(3).tolist() == [893, 1106, 414]
    again = prepare.prepare_house_price(house_spec(), tmp_path / "cache", DATA)
    assert again == prepared


def _run_baseline(task: str, prepared, tmp: Path) -> dict:
    ws = tmp / "workspace"
    shutil.copytree(TASKS / task / "starter", ws)
    shutil.copytree(prepared.public, ws / "data")
    proc = subprocess.run([sys.executable, "baseline.py"], cwd=ws, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run([sys.executable, "evaluate.py"], cwd=ws, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)  # the starter helper scores the validation split
    return run_grader(task, ws, prepared.private, tmp)


@needs_house
def test_house_price_baseline_reproduces_mlgym(tmp_path):
    prepared = prepare.prepare_house_price(house_spec(), tmp_path / "cache", DATA)
    scores = _run_baseline("house-price", prepared, tmp_path)["scores"]
    assert abs(scores["r2"] - 0.880) <= 0.005  # MLGym's baseline: r2 0.87999, rmse 30340
    recorded = load_task(TASKS / "house-price").baseline_scores
    assert scores["r2"] == pytest.approx(recorded["r2"], abs=1e-6)
    assert scores["rmse"] == pytest.approx(recorded["rmse"], rel=1e-4)


@needs_titanic
def test_titanic_split_and_baseline(tmp_path):
    spec = load_dataset(DATASETS / "titanic.yaml")
    prepared = prepare.prepare_titanic(spec, tmp_path / "cache", DATA)
    assert sorted(os.listdir(prepared.private)) == ["ground_truth.csv"]
    assert "ground_truth.csv" not in os.listdir(prepared.public)
    scores = _run_baseline("titanic", prepared, tmp_path)["scores"]
    recorded = load_task(TASKS / "titanic").baseline_scores
    assert scores["accuracy"] == pytest.approx(recorded["accuracy"], abs=1e-6)


@pytest.mark.parametrize("task", [pytest.param("house-price", marks=needs_house),
                                  pytest.param("titanic", marks=needs_titanic)])
def test_baseline_episode_scores_the_baseline_and_is_not_flagged(tmp_path, task):
    """`rgym run --agent baseline` on the real data: the recorded score, and a clean
    integrity verdict (the starter reading its own public files is no test-data access)."""
    from rgym_integrity import integrity_problems

    env = {**os.environ, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", f"mlgym/{task}",
                           "--agent", "baseline", "--runs-dir", str(tmp_path / "runs"),
                           "--data-dir", str(DATA), "--json"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted", result.get("error")
    spec = load_task(TASKS / task)
    primary = spec.primary_metric.name
    assert result["final_scores"][primary] == pytest.approx(spec.baseline_scores[primary], abs=1e-6)
    assert integrity_problems(tmp_path / "runs") == []


# ----------------------------------------------------------------------------- pack


def test_plugin_registers_tasks_and_datasets():
    registry = load_registry(extra_plugins=[("tabular-under-test", plugin)], entry_points=False)
    assert {"mlgym/house-price", "mlgym/titanic"} <= set(registry.tasks)
    assert {"mlgym/house-price", "mlgym/titanic"} <= set(registry.datasets)
    task = registry.task("mlgym/house-price")
    assert task.primary_metric.name == "r2" and task.metric("rmse").direction == "minimize"
    assert registry.task("mlgym/titanic").primary_metric.name == "accuracy"
    for t in ("house-price", "titanic"):
        assert not (TASKS / t / "starter" / "answer.csv").exists()
        assert sorted(p.name for p in (TASKS / t / "grader").iterdir()
                      if p.suffix == ".py") == ["evaluate.py"]


def test_check_pack_passes():
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "check-pack", str(PACK)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_house
@pytest.mark.slow
def test_scripted_agent_end_to_end(tmp_path):
    env = {**os.environ, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "mlgym/house-price",
                           "--agent", "scripted", "--runs-dir", str(tmp_path / "runs"),
                           "--data-dir", str(DATA)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    results = list((tmp_path / "runs").rglob("result.json"))
    assert len(results) == 1, proc.stdout + proc.stderr
    result = json.loads(results[0].read_text())
    assert result["status"] == "submitted", result.get("error")
    assert abs(result["final_scores"]["r2"] - 0.880) <= 0.005
    workspace_files = subprocess.run(["tar", "tzf", str(results[0].parent / "workspace.tar.gz")],
                                     capture_output=True, text=True).stdout
    assert "answer.csv" not in workspace_files

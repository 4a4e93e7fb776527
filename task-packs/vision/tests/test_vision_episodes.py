"""Episodes end to end through the command line: the baseline agent on each task's
``cpu`` profile (real Fashion-MNIST from Debian's package; fixtures in the real
formats for every task), and the bad-input paths of an episode.

The recorded ``cpu`` baselines are compared within their recorded tolerance: the
starters fix their seeds and thread count, yet CPU kernels differ between machines
(Fashion-MNIST: 0.7756 with 2 threads, 0.7757 with 1).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from rgym_integrity import integrity_problems
from rgym_task_vision import fixtures
from rgym_task_vision.fixtures import FIXTURE_NAMESPACE
from vision_testlib import (
    FASHION_SYSTEM,
    FIXTURE_SCORES,
    fixture_args,
    subprocess_env,
    within_tolerance,
)

from rgym_core.testing import run_cli, skip_or_fail

pytestmark = pytest.mark.timeout(900)  # an episode trains a model: give a loaded machine room


def rgym_run(task: str, tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 900):
    runs = tmp_path / "runs"
    proc = run_cli("run", task, "--profile", "cpu", "--agent", "baseline", "--runs-dir", str(runs),
                   "--json", *args, env=env, timeout=timeout)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        result = None
    return proc, result


@pytest.fixture(scope="module")
def episode_env(fixture_data, tmp_path_factory) -> dict[str, str]:
    """Fixture plugin on PYTHONPATH, one cache for the module's episodes."""
    cache = tmp_path_factory.mktemp("episode-cache")
    return subprocess_env(fixture_data.env, {"RGYM_CACHE_DIR": str(cache)})


# ----------------------------------------------------------------------------- real data


def test_fashion_mnist_real_data_scores_the_recorded_cpu_baseline(tmp_path, episode_env):
    """The acceptance run: Debian's files (DIR = /usr/share/datasets, laid out as
    DIR/fashion-mnist/*-ubyte.gz), the cpu profile, the baseline agent."""
    if not FASHION_SYSTEM.is_dir():
        skip_or_fail(f"{FASHION_SYSTEM} absent: apt-get install dataset-fashion-mnist "
                     f"(.ci/setup.d/30-vision.sh installs it)")
    proc, result = rgym_run("mlgym/fashion-mnist", tmp_path, episode_env,
                            "--data-dir", str(FASHION_SYSTEM.parent))
    assert result is not None, proc.stdout + proc.stderr
    assert result["status"] == "submitted", (result.get("error"), proc.stderr[-3000:])
    assert result["profile"] == "cpu"
    assert within_tolerance(result["final_scores"], "mlgym/fashion-mnist"), \
        (result["final_scores"], proc.stderr[-3000:])
    assert integrity_problems(tmp_path / "runs") == []


# ----------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("task", ["mlgym/cifar10", "mlgym/coco-captioning", "mlgym/fashion-mnist"])
def test_baseline_episode_on_fixture_data(tmp_path, fixture_data, episode_env, task):
    proc, result = rgym_run(task, tmp_path, episode_env, *fixture_args(task, fixture_data))
    assert result is not None, proc.stdout + proc.stderr
    assert result["status"] == "submitted", (result.get("error"), proc.stderr[-3000:])
    assert within_tolerance(result["final_scores"], task, FIXTURE_SCORES.get(task)), result["final_scores"]
    grader_logs = list((tmp_path / "runs").rglob("grader/*.json"))
    assert grader_logs, "the grader left no record"
    assert integrity_problems(tmp_path / "runs") == []


# ----------------------------------------------------------------------------- bad input


def test_corrupted_data_file_stops_the_run_before_it_starts(tmp_path, fixture_data, episode_env):
    data = fixture_data.copy_of("cifar10", tmp_path / "data")
    tarball = data / "cifar10" / "cifar-10-python.tar.gz"
    tarball.write_bytes(tarball.read_bytes()[:-100])
    env = {**episode_env, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc, _ = rgym_run("mlgym/cifar10", tmp_path, env, "--data-dir", str(data),
                       "--dataset", "data=vision-fixture/cifar10")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert f"{tarball}: corrupted or different data file 'cifar-10-python.tar.gz'" in out
    assert "Traceback" not in out
    assert not list((tmp_path / "runs").rglob("result.json"))


def test_missing_data_names_the_file_checksum_and_source(tmp_path, episode_env):
    (tmp_path / "empty").mkdir()
    env = {**episode_env, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc, _ = rgym_run("mlgym/coco-captioning", tmp_path, env, "--data-dir", str(tmp_path / "empty"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "missing data of dataset 'mlgym/coco-2017'" in out
    assert "113a836d90195ee1f884e704da6304dfaaecff1f023f49b6ca93c4aaae470268" in out
    assert "Traceback" not in out


def test_wrong_submission_format_is_an_evaluation_error(tmp_path, fixture_data, episode_env):
    proc, result = rgym_run("mlgym/cifar10", tmp_path, episode_env,
                            *fixture_args("mlgym/cifar10", fixture_data),
                            "--agent-option", "command=printf 'label\\n3\\n' > submission.csv")
    assert result is not None, proc.stdout + proc.stderr
    final = result.get("final_score_record") or {}
    text = json.dumps(result)
    assert "has 1 predictions but the test set has 300 images" in text, text[:3000]
    assert not result.get("final_scores"), final
    assert "Traceback" not in proc.stderr


def test_pretrained_weights_that_do_not_load_stop_the_run(tmp_path, fixture_data):
    """A weights file whose checksum matches its spec but is not a ResNet-50."""
    data = tmp_path / "data"
    (data / "resnet50-imagenet").mkdir(parents=True)
    os.symlink(fixture_data.data / "coco-2017", data / "coco-2017")
    bad = data / "resnet50-imagenet" / "resnet50-0676ba61.pth"
    bad.write_bytes(b"\x80\x04 a truncated checkpoint")
    from vision_testlib import load_spec

    specs = [fixtures.fixture_spec(load_spec("resnet50-imagenet"), bad.parent),
             fixtures.fixture_spec(load_spec("coco-2017"), data / "coco-2017",
                                   options={"split": {"train": 20, "val": 6, "test": 6,
                                                      "seed": 42, "image_size": 32}})]
    env = subprocess_env(fixtures.install_fixture_datasets(tmp_path / "site", specs),
                         {"RGYM_CACHE_DIR": str(tmp_path / "cache")})
    proc, _ = rgym_run("mlgym/coco-captioning", tmp_path, env,
                       *fixture_args("mlgym/coco-captioning", fixture_data)[:1], str(data),
                       "--dataset", f"data={FIXTURE_NAMESPACE}/coco-2017",
                       "--dataset", f"pretrained={FIXTURE_NAMESPACE}/resnet50-imagenet")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert f"{bad}: the weights file does not load as a PyTorch state dict" in out
    assert "Traceback" not in out
    shutil.rmtree(tmp_path / "site")

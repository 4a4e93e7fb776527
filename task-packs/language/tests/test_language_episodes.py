"""Episodes end to end through the command line: the baseline agent on each
task's ``cpu`` profile on fixture data in the real formats (scores compared
exactly with the recorded baselines: fixed seeds and thread counts), and the
bad-input paths of an episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from language_testlib import assert_reproduces, fixture_args, result_of, subprocess_env
from rgym_integrity import integrity_problems

from rgym_core.testing import run_cli

pytestmark = pytest.mark.timeout(900)


def rgym_run(task: str, tmp_path: Path, env: dict[str, str], *args: str):
    proc = run_cli("run", task, "--profile", "cpu", "--agent", "baseline", "--runs-dir",
                   str(tmp_path / "runs"), "--json", *args, env=env, timeout=900)
    return proc, result_of(proc.stdout)


@pytest.fixture(scope="module")
def episode_env(fixture_data, tmp_path_factory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("episode-cache")
    return subprocess_env(fixture_data.env, {"RGYM_CACHE_DIR": str(cache)})


@pytest.mark.parametrize("task", ["mlgym/fineweb-lm", "mlgym/mnli"])
def test_baseline_episode_on_fixture_data(tmp_path, fixture_data, episode_env, task):
    proc, result = rgym_run(task, tmp_path, episode_env, *fixture_args(task, fixture_data))
    assert result is not None, proc.stdout + proc.stderr
    assert result["status"] == "submitted", (result.get("error"), proc.stderr[-3000:])
    assert result["profile"] == "cpu"
    assert_reproduces(task, result["final_scores"])
    assert result["scores"][-1]["confined"] is not False
    assert integrity_problems(tmp_path / "runs") == []


def test_corrupted_shard_stops_the_run_before_it_starts(tmp_path, fixture_data, episode_env):
    data = fixture_data.copy_of("fineweb10B", tmp_path / "data")
    shard = data / "fineweb10B" / "fineweb_train_000002.bin"
    shard.write_bytes(shard.read_bytes()[:-3])
    env = {**episode_env, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc, _ = rgym_run("mlgym/fineweb-lm", tmp_path, env, "--data-dir", str(data),
                       "--dataset", "data=language-fixture/fineweb10B")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert f"{shard}: damaged or truncated token shard" in out
    assert "Traceback" not in out
    assert not list((tmp_path / "runs").rglob("result.json"))


def test_missing_data_names_the_file_checksum_and_source(tmp_path, episode_env):
    (tmp_path / "empty").mkdir()
    env = {**episode_env, "RGYM_CACHE_DIR": str(tmp_path / "cache")}
    proc, _ = rgym_run("mlgym/mnli", tmp_path, env, "--data-dir", str(tmp_path / "empty"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "multinli_1.0.zip: missing data file of dataset 'mlgym/mnli'" in out
    assert "049f507b9e36b1fcb756cfd5aeb3b7a0cfcb84bf023793652987f7e7e0957822" in out
    assert "Traceback" not in out


def test_wrong_submission_format_is_an_evaluation_error(tmp_path, fixture_data, episode_env):
    proc, result = rgym_run("mlgym/fineweb-lm", tmp_path, episode_env,
                            *fixture_args("mlgym/fineweb-lm", fixture_data), "--agent-option",
                            "command=echo '{}' > model_config.json && echo junk > model.pt")
    assert result is not None, proc.stdout + proc.stderr
    text = json.dumps(result)
    assert "failed (exit code" in text and "torch.load(weights_only=True)" in text, text[:3000]
    assert not result.get("final_scores")
    assert "Traceback (most recent call last)" not in proc.stderr

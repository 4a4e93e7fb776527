"""End to end through the CLI.

The acceptance run: `rgym run mlgym/breakout-minatar --profile cpu --agent baseline`
trains the starter with the `cpu` sizes in the episode's sandbox and must score the
recorded `cpu` baseline within its standard error, on the local sandbox and on Docker
(the pack image installs the JAX stack).  The two other tasks run end to end on the
local sandbox with the scripted agent and an even smaller training (the whole suite
must fit in a few minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rgym_integrity import integrity_problems
from rl_testlib import TASK_DIRS

from rgym_core import load_task
from rgym_core.testing import skip_or_fail

# Training in the episode takes minutes (far more on a loaded machine): beyond the suite's
# default per-test timeout, within the 1200 s that tests/test_ci.py allows any test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

RGYM = [sys.executable, "-m", "rgym_core.cli"]


def rgym(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RGYM, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1140)


def run_json(task: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = rgym("run", task, "--json", "--runs-dir", str(tmp_path / "runs"), *extra, cwd=tmp_path,
                env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def check_matches_cpu_baseline(result: dict[str, Any]) -> None:
    assert result["status"] == "submitted", result.get("error")
    assert result["profile"] == "cpu"
    spec = load_task(TASK_DIRS["Breakout-MinAtar"]).with_profile("cpu")
    assert spec.baseline is not None
    recorded, tolerance = spec.baseline_scores, spec.baseline.tolerance_for("Reward Mean")
    scores = result["final_scores"]
    assert abs(scores["Reward Mean"] - recorded["Reward Mean"]) <= tolerance, \
        (scores, recorded, tolerance)


def test_cpu_baseline_reproduces_on_the_local_sandbox(tmp_path: Path) -> None:
    result = run_json("mlgym/breakout-minatar", tmp_path, "--profile", "cpu", "--agent", "baseline")
    check_matches_cpu_baseline(result)
    submit = [s for s in result["scores"] if s["kind"] == "submit"][0]
    assert submit["details"]["confined"] is True
    assert integrity_problems(tmp_path / "runs") == []


@pytest.mark.parametrize("task", ["mlgym/meta-maze", "mlgym/mountain-car-continuous"])
def test_cpu_baseline_episode_is_not_flagged(task: str, tmp_path: Path) -> None:
    """The two other tasks' cpu baselines (about 40 s each here) through an episode: the
    integrity monitor leaves the task's own starter alone."""
    result = run_json(task, tmp_path, "--profile", "cpu", "--agent", "baseline")
    assert result["status"] == "submitted", result.get("error")
    assert result["profile"] == "cpu" and result["final_scores"], result
    assert integrity_problems(tmp_path / "runs") == []


TINY_TRAINING = r"""python - <<'EOF'
import yaml
config = yaml.safe_load(open("config.yaml"))
config["network"] = {"num_hidden_units": 16, "num_hidden_layers": 1}
config["profiles"]["cpu"] = {"num_train_steps": 2048, "num_train_envs": 8, "n_steps": 32,
                             "n_minibatch": 2, "epoch_ppo": 2}
yaml.safe_dump(config, open("config.yaml", "w"), sort_keys=False)
EOF
python src/train.py && ls checkpoints"""


@pytest.mark.parametrize("task", ["mlgym/meta-maze", "mlgym/mountain-car-continuous"])
def test_scripted_tiny_training_is_graded(task: str, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "bash", "args": {"command": TINY_TRAINING}},
                                  {"tool": "submit"}]))
    result = run_json(task, tmp_path, "--agent", "scripted", "--agent-option", f"script={script}")
    assert result["status"] == "submitted", result.get("error")
    submit = [s for s in result["scores"] if s["kind"] == "submit"][0]
    assert submit["valid"], submit
    assert submit["details"]["episodes"] == 6400
    assert [c["checkpoint"] for c in submit["details"]["checkpoints"]] == [
        f"config-42-{i}.msgpack" for i in range(5)]


@pytest.mark.docker
def test_cpu_baseline_reproduces_on_docker(tmp_path: Path) -> None:
    try:
        from rgym_sandbox_docker import images
        from rgym_sandbox_docker.testing import DockerNotReady, client, episode_env
    except ImportError:
        skip_or_fail("rgym-sandbox-docker is not installed")
    try:
        docker_env = episode_env("task-rl")
    except DockerNotReady as exc:
        skip_or_fail(str(exc))
    spec = load_task(TASK_DIRS["Breakout-MinAtar"])
    images.task_image(client(), list(spec.resources.requirements),  # the JAX layer, once
                      base=docker_env["RGYM_DOCKER_BASE"])
    env = {**os.environ, **docker_env}
    result = run_json("mlgym/breakout-minatar", tmp_path, "--profile", "cpu", "--agent", "baseline",
                      "--sandbox", "docker", env=env)
    assert result["sandbox"].startswith("docker")
    check_matches_cpu_baseline(result)

"""Lifecycle: clean-up after an interrupted `rgym run`, `rgym sandbox prune`,
and the demo episode giving the local backend's result."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docker_testlib import TEST_LABELS, client_or_skip
from rgym_sandbox_docker import lifecycle

client_or_skip()
pytestmark = pytest.mark.docker

RGYM = [sys.executable, "-m", "rgym_core.cli"]


def _label_filter(**extra: str) -> dict[str, list[str]]:
    labels = {**TEST_LABELS, **extra}
    return {"label": [f"{k}={v}" for k, v in labels.items()]}


def test_prune_removes_left_behind_containers(docker_client, image: str, test_env) -> None:
    labels = lifecycle.labels_for("prune-me", "episode", TEST_LABELS)
    kept = lifecycle.labels_for("keep-me", "episode", TEST_LABELS)
    for lab in (labels, labels, kept):
        docker_client.containers.run(image, ["sleep", "infinity"], detach=True, labels=lab,
                                     network_mode="none")
    docker_client.volumes.create(labels=labels)
    done = subprocess.run([*RGYM, "sandbox", "prune", "--run-id", "prune-me"], env=test_env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "removed 2 container(s) and 1 volume(s)" in done.stdout
    assert docker_client.containers.list(all=True, filters=_label_filter(**{
        lifecycle.RUN_ID_LABEL: "prune-me"})) == []
    assert len(docker_client.containers.list(all=True, filters=_label_filter(**{
        lifecycle.RUN_ID_LABEL: "keep-me"}))) == 1
    done = subprocess.run([*RGYM, "sandbox", "prune", "--label", "rgym.test=sandbox-docker"],
                          env=test_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "removed 1 container(s)" in done.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_no_container(docker_client, test_env, tmp_path: Path,
                                             sig: signal.Signals) -> None:
    script = tmp_path / "script.yaml"
    script.write_text('- {tool: bash, args: {command: "sleep 600"}}\n')
    proc = subprocess.Popen([*RGYM, "run", "rgym/demo", "--agent", "scripted", "--sandbox",
                             "docker", "--agent-option", f"script={script}", "--quiet",
                             "--runs-dir", str(tmp_path / "runs")],
                            env=test_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):  # wait until the episode's command runs in its container
            running = docker_client.containers.list(filters=_label_filter())
            if running and "sleep 600" in json.dumps(running[0].top()):
                break
            assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
            time.sleep(0.1)
        else:
            pytest.fail("the episode's container never ran the command")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert docker_client.containers.list(all=True, filters=_label_filter()) == [], out.decode()


def _result(runs: Path) -> dict:
    (result,) = runs.rglob("result.json")
    return json.loads(result.read_text())


def test_demo_episode_matches_the_local_backend(test_env, tmp_path: Path) -> None:
    results = {}
    for backend in ("local", "docker"):
        runs = tmp_path / backend
        done = subprocess.run([*RGYM, "run", "rgym/demo", "--agent", "scripted", "--sandbox",
                               backend, "--quiet", "--runs-dir", str(runs)], env=test_env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        results[backend] = _result(runs)
    local, docker = results["local"], results["docker"]
    assert docker["sandbox"] == "docker/docker" and docker["status"] == local["status"]
    assert docker["final_scores"] == local["final_scores"] and docker["final_scores"]
    assert [(s["kind"], s["scores"]) for s in docker["scores"]] == \
        [(s["kind"], s["scores"]) for s in local["scores"]]
    assert docker["steps"] == local["steps"]

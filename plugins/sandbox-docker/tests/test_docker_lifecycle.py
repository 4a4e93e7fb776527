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


def _dead_owner() -> dict[str, str]:
    """Owner labels of a process that has exited."""
    import attrs

    done = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    return attrs.evolve(lifecycle.Owner.me(), pid=int(done.stdout), start="1").labels()


def _prune(env: dict[str, str], *args: str, stdin: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    session = "=".join(list(TEST_LABELS.items())[-1])  # only this session's containers
    return subprocess.run([*RGYM, "sandbox", "prune", "--label", session, *args], env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)


def test_prune_removes_only_containers_whose_owner_is_gone(docker_client, image: str,
                                                           test_env) -> None:
    orphan = {**lifecycle.labels_for("prune-me", "episode", TEST_LABELS), **_dead_owner()}
    live = lifecycle.labels_for("live-run", "episode", TEST_LABELS)  # owned by this process
    legacy = {**TEST_LABELS, lifecycle.MANAGED_LABEL: "1", lifecycle.RUN_ID_LABEL: "legacy"}
    for lab in (orphan, orphan, live, legacy):
        docker_client.containers.run(image, ["sleep", "infinity"], detach=True, labels=lab,
                                     network_mode="none")
    docker_client.volumes.create(labels=orphan)
    done = _prune(test_env)
    assert done.returncode == 0, done.stderr
    assert "removed 2 container(s) and 1 volume(s)" in done.stdout
    assert "kept 2 of live runs" in done.stdout
    left = {c.labels[lifecycle.RUN_ID_LABEL] for c in docker_client.containers.list(
        all=True, filters=_label_filter())}
    assert left == {"live-run", "legacy"}
    # --all asks; without a terminal and without --yes it refuses
    refused = _prune(test_env, "--all", stdin="y\n")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "live-run" in refused.stdout and "no owner recorded" in refused.stdout
    assert len(docker_client.containers.list(all=True, filters=_label_filter())) == 2
    forced = _prune(test_env, "--all", "--yes")
    assert forced.returncode == 0 and "removed 2 container(s)" in forced.stdout
    assert docker_client.containers.list(all=True, filters=_label_filter()) == []


def _start_episode(test_env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "script.yaml"
    script.write_text('- {tool: bash, args: {command: "sleep 600"}}\n')
    return subprocess.Popen([*RGYM, "run", "rgym/demo", "--agent", "scripted", "--sandbox",
                             "docker", "--agent-option", f"script={script}", "--quiet",
                             "--runs-dir", str(tmp_path / "runs")],
                            env=test_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_for_commands(docker_client, procs: list[subprocess.Popen[bytes]]):  # type: ignore[no-untyped-def]
    """The episode containers, once each runs its command."""
    for _ in range(1800):
        running = [c for c in docker_client.containers.list(filters=_label_filter())
                   if c.labels.get(lifecycle.ROLE_LABEL) == "episode"
                   and "sleep 600" in json.dumps(c.top())]
        if len(running) == len(procs):
            return running
        for proc in procs:
            assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
        time.sleep(0.1)
    pytest.fail("the episodes' containers never ran their command")


def test_live_episodes_survive_prune_and_signals_clean_up(docker_client, test_env,
                                                          tmp_path: Path) -> None:
    """Two episodes run at once: `prune` leaves them alone; SIGTERM ends one, SIGINT
    the other, and neither leaves a container behind."""
    procs = [_start_episode(test_env, tmp_path / name) for name in ("term", "int")]
    try:
        containers = _wait_for_commands(docker_client, procs)
        done = _prune(test_env)
        assert done.returncode == 0 and "removed 0 container(s)" in done.stdout, done.stdout
        assert "kept 2 of live runs" in done.stdout
        assert _prune(test_env, "--all", stdin="n\n").returncode == 2  # no terminal, no --yes
        for container in containers:
            container.reload()
            assert container.status == "running" and "sleep 600" in json.dumps(container.top())
        assert all(proc.poll() is None for proc in procs)
        procs[0].send_signal(signal.SIGTERM)
        procs[1].send_signal(signal.SIGINT)
        outs = [proc.communicate(timeout=120)[0].decode() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert docker_client.containers.list(all=True, filters=_label_filter()) == [], outs


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

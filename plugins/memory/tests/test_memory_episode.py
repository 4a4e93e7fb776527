"""End to end: `rgym run` as a subprocess, an agent that writes then reads its memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = [
    {"tool": "bash", "args": {"command": "ls /sys/class/net"}},
    {"tool": "memory_write", "args": {"text": "Lowering the learning rate to 3e-4 stopped the "
                                              "loss from diverging", "tags": ["lr", "results"]}},
    {"tool": "memory_write", "args": {"text": "The grader reads submission.csv with columns id,y",
                                      "tags": "format"}},
    {"tool": "memory_read", "args": {"query": "which learning rate fixed the exploding loss?",
                                     "k": 2}},
    {"tool": "submit"},
]


def run_episode(tmp_path: Path, script: list[dict[str, Any]], *extra: str,
                env: dict[str, str] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    script_file = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    script_file.write_text(json.dumps(script))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "RGYM_MEMORY"))}
    # Any attempt to reach the network (e.g. a model download) would fail loudly.
    full_env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
                     "RGYM_MEMORY_DIR": str(tmp_path / "shared"), **(env or {})})
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo",
                           "--tool", "memory", "--no-network", "--agent-option",
                           f"script={script_file}", "--runs-dir", str(tmp_path / "runs"),
                           "--json", *extra],
                          capture_output=True, text=True, env=full_env, timeout=240)
    assert proc.stdout.strip(), proc.stderr
    result = json.loads(proc.stdout)
    lines = (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert result["error"] is None or "submission" in result["error"], result["error"]
    return result, [e["step"] for e in events if e["type"] == "step"]


def memory_info(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s["observation"]["info"]["memory"] for s in steps
            if "memory" in s["observation"]["info"]]


@pytest.mark.slow
def test_agent_writes_and_reads_memory_with_the_real_model(tmp_path: Path) -> None:
    result, steps = run_episode(tmp_path, SCRIPT)
    assert [s["action"]["tool"] for s in steps] == ["bash", "memory_write", "memory_write",
                                                     "memory_read", "submit"]
    infos = memory_info(steps)
    assert [i["op"] for i in infos] == ["write", "write", "read"]
    assert all(i["latency_ms"] > 0 and i["index"] == "exact" for i in infos)
    read = steps[3]["observation"]
    assert not read["error"]
    assert read["output"].splitlines()[1].startswith("[1] #0 (score ")  # the lr note first
    assert "learning rate to 3e-4" in read["output"].split("[2]")[0]
    saved = Path(result["run_dir"]) / "memory"
    snapshot = saved / "snapshots" / (saved / "CURRENT").read_text().strip()
    meta = json.loads((snapshot / "meta.json").read_text())
    assert meta["embedder"] == "all-MiniLM-L6-v2" and meta["count"] == 2


def test_memory_carries_over_between_episodes_of_a_task(tmp_path: Path) -> None:
    env = {"RGYM_MEMORY_EMBEDDER": "hashing", "RGYM_MEMORY_PERSIST": "task"}
    run_episode(tmp_path, SCRIPT, env=env)
    _, steps = run_episode(tmp_path, [
        {"tool": "memory_read", "args": {"query": "learning rate loss", "k": 5, "tags": "lr"}},
        {"tool": "submit"}], env=env)
    info = memory_info(steps)[0]
    assert info["count"] == 2 and info["returned"] == 1
    assert "Lowering the learning rate" in steps[0]["observation"]["output"]
    assert (tmp_path / "shared" / "rgym__demo" / "CURRENT").is_file()


def _docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine answers"
    try:
        import rgym_sandbox_docker  # noqa: F401
    except ImportError:
        return "rgym-sandbox-docker is not installed"
    return None


@pytest.mark.docker
def test_memory_tools_work_in_a_sandbox_without_network(tmp_path: Path) -> None:
    why = _docker_ready()
    if why:
        pytest.skip(why)
    env = {"RGYM_MEMORY_EMBEDDER": "hashing"}
    if "RGYM_DOCKER_BASE" not in os.environ and subprocess.run(
            ["docker", "image", "inspect", "rgym-local-base:latest"],
            capture_output=True).returncode == 0:
        env["RGYM_DOCKER_BASE"] = "rgym-local-base:latest"
    _, steps = run_episode(tmp_path, SCRIPT, "--sandbox", "docker", env=env)
    assert steps[0]["observation"]["output"].split() == ["lo"]  # no network interface
    assert [i["op"] for i in memory_info(steps)] == ["write", "write", "read"]
    assert "#0" in steps[3]["observation"]["output"]

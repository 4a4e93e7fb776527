"""A sweep of Docker episodes with the local executor: episodes at the same time, each
in its own container (skipped without a Docker engine, except in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rgym_core.rundir import iter_run_dirs
from rgym_core.testing import run_cli

lifecycle = pytest.importorskip("rgym_sandbox_docker.lifecycle")
try:
    lifecycle.docker_client()
except lifecycle.DockerUnavailable as exc:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"CI=true but {exc}; run .ci/docker-setup.sh first") from exc
    pytest.skip(str(exc), allow_module_level=True)

pytestmark = pytest.mark.docker


@pytest.mark.timeout(900)
def test_docker_episodes_run_side_by_side_in_their_own_containers(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    proc = run_cli("sweep", "rgym/demo", "--agent", "react", "--model", "mock/script", "--agent-option",
                   'replies=["grep -o \\"containers/[0-9a-f]*\\" /proc/self/mountinfo | head -n 1", '
                   '"python baseline.py", "submit"]', "--seeds", "1-2",
                   "--max-parallel", "2", "--sandbox", "docker", "--sweep-dir", str(folder), "--quiet",
                   env={"RGYM_DOCKER_BASE": os.environ.get("RGYM_DOCKER_BASE", "rgym-local-base:latest")},
                   timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list(iter_run_dirs(folder))
    assert len(runs) == 2
    hosts = set()
    for run in runs:
        result = run.result()
        assert result.status.value == "submitted" and result.sandbox.endswith("docker")
        assert result.final_scores == pytest.approx(result.baseline_scores)
        hosts.add(run.steps()[0].observation.output.strip())
    assert len(hosts) == 2 and all(h.startswith("containers/") for h in hosts)  # two containers

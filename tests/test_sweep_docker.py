"""A sweep of Docker episodes with the local executor: episodes at the same time, each
in its own container (skipped without a Docker engine, except in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgym_core.rundir import iter_run_dirs
from rgym_core.testing import run_cli, skip_or_fail

docker_testing = pytest.importorskip("rgym_sandbox_docker.testing")
try:
    DOCKER_ENV = docker_testing.episode_env("core-sweep")
except docker_testing.DockerNotReady as exc:
    skip_or_fail(str(exc), module=True)

pytestmark = pytest.mark.docker


@pytest.mark.timeout(900)
def test_docker_episodes_run_side_by_side_in_their_own_containers(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    proc = run_cli("sweep", "rgym/demo", "--agent", "react", "--model", "mock/script", "--agent-option",
                   'replies=["grep -o \\"containers/[0-9a-f]*\\" /proc/self/mountinfo | head -n 1", '
                   '"python baseline.py", "submit"]', "--seeds", "1-2",
                   "--max-parallel", "2", "--sandbox", "docker", "--sweep-dir", str(folder), "--quiet",
                   env=DOCKER_ENV,
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

"""Both language tasks on the Docker sandbox, end to end: the baseline agent on
the ``cpu`` profile with fixture data gets the recorded score, as on the local
sandbox.  The pack layer installs ``torch==2.13.0`` from the host's wheel folder
(contract 6: ``RGYM_PIP_FIND_LINKS``, default ``/opt/wheels``).  Skipped without
an engine, except in CI where that is a failure."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from language_testlib import fixture_args, in_ci, recorded, subprocess_env

from rgym_core.testing import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]
WHEELS = Path(os.environ.get("RGYM_PIP_FIND_LINKS", "/opt/wheels"))


def _skip_or_fail(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def docker_env(fixture_data, tmp_path_factory) -> dict[str, str]:
    try:
        from rgym_sandbox_docker import images, lifecycle
    except ImportError:
        _skip_or_fail("rgym-sandbox-docker is not installed")
    try:
        client = lifecycle.docker_client()
    except lifecycle.DockerUnavailable as exc:
        _skip_or_fail(str(exc))
    if not any(WHEELS.glob("torch-2.13.0*.whl")):
        _skip_or_fail(f"no torch 2.13.0 wheel in {WHEELS} (set RGYM_PIP_FIND_LINKS)")
    base = os.environ.get("RGYM_DOCKER_BASE")
    if not base:
        try:
            client.images.get("rgym-local-base:latest")
            base = "rgym-local-base:latest"
        except Exception:  # noqa: BLE001 - the public default then
            base = images.DEFAULT_BASE
    session = os.environ.get("RGYM_TEST_SESSION") or uuid.uuid4().hex[:12]
    return subprocess_env(fixture_data.env, {
        "RGYM_CACHE_DIR": str(tmp_path_factory.mktemp("docker-cache")),
        "RGYM_DOCKER_BASE": base, "RGYM_PIP_FIND_LINKS": str(WHEELS),
        "RGYM_DOCKER_LABELS": f"rgym.test=task-language,rgym.test.session={session}"})


@pytest.mark.parametrize("task", ["mlgym/fineweb-lm", "mlgym/mnli"])
def test_baseline_episode_in_docker(tmp_path, fixture_data, docker_env, task):
    proc = run_cli("run", task, "--profile", "cpu", "--agent", "baseline", "--sandbox", "docker",
                   "--runs-dir", str(tmp_path / "runs"), "--json",
                   *fixture_args(task, fixture_data), env=docker_env, timeout=1150)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(proc.stdout[-2000:] + proc.stderr[-4000:])
    assert result["status"] == "submitted", (result.get("error"), proc.stderr[-3000:])
    assert result["sandbox"] in ("docker", "rgym/docker", "docker/docker"), result["sandbox"]
    assert result["final_scores"] == recorded(task)

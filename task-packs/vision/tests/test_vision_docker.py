"""Every vision task on the Docker sandbox, end to end: the baseline agent on the
``cpu`` profile with fixture data gets the same score as on the local sandbox.

The pack layer installs ``torch==2.13.0`` from the host's wheel folder (contract 6:
``RGYM_PIP_FIND_LINKS``, default ``/opt/wheels``), never a CUDA build from the
package index. Skipped without an engine, except in CI where that is a failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from vision_testlib import FIXTURE_SCORES, fixture_args, subprocess_env, within_tolerance

from rgym_core.testing import run_cli, skip_or_fail

# The first episode builds the pack layer (torch from the wheel folder): minutes.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]
WHEELS = Path(os.environ.get("RGYM_PIP_FIND_LINKS", "/opt/wheels"))


@pytest.fixture(scope="module")
def docker_env(fixture_data, tmp_path_factory) -> dict[str, str]:
    try:
        from rgym_sandbox_docker import images
        from rgym_sandbox_docker.testing import DockerNotReady, episode_env
    except ImportError:
        skip_or_fail("rgym-sandbox-docker is not installed")
    pack_layer = (images.containers_dir() / "pack" / "Dockerfile").read_text()
    if "FIND_LINKS" not in pack_layer and "find-links" not in pack_layer:
        skip_or_fail("the Docker pack layer cannot install torch from a local wheel folder yet "
                     "(contract 6, DKR): without it pip would fetch a CUDA build")
    try:
        env = episode_env("task-vision", wheels=WHEELS, wheel_globs=["torch-2.13.0*.whl"])
    except DockerNotReady as exc:
        skip_or_fail(str(exc))
    return subprocess_env(fixture_data.env, {
        "RGYM_CACHE_DIR": str(tmp_path_factory.mktemp("docker-cache")), **env})


@pytest.mark.parametrize("task", ["mlgym/fashion-mnist", "mlgym/cifar10", "mlgym/coco-captioning"])
def test_baseline_episode_in_docker(tmp_path, fixture_data, docker_env, task):
    proc = run_cli("run", task, "--profile", "cpu", "--agent", "baseline", "--sandbox", "docker",
                   "--runs-dir", str(tmp_path / "runs"), "--json",
                   *fixture_args(task, fixture_data), env=docker_env, timeout=1140)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(proc.stdout[-2000:] + proc.stderr[-4000:])
    assert result["status"] == "submitted", (result.get("error"), proc.stderr[-3000:])
    assert result["sandbox"] in ("docker", "rgym/docker", "docker/docker"), result["sandbox"]
    assert within_tolerance(result["final_scores"], task, FIXTURE_SCORES.get(task)), result["final_scores"]

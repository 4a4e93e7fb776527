"""Fixtures of the Docker tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from docker_testlib import (  # noqa: E402
    TEST_LABELS,
    client_or_skip,
    episode_image,
    leftovers,
)

from rgym_core.sandbox import SandboxConfig  # noqa: E402
from rgym_core.testing import in_ci  # noqa: E402
from rgym_core.testing.conformance import sandbox_factory  # noqa: E402


@pytest.fixture(scope="session")
def docker_client():  # type: ignore[no-untyped-def]
    client = client_or_skip()
    yield client
    left = leftovers(client)
    if left:  # clean up, then fail: a test left containers behind
        from rgym_sandbox_docker.lifecycle import prune

        prune(client, labels=TEST_LABELS)
        pytest.fail(f"Docker tests left containers/volumes behind: {left}")


@pytest.fixture(scope="session")
def image(docker_client) -> str:  # type: ignore[no-untyped-def]
    return episode_image()


@pytest.fixture
def make_sandbox(image: str) -> Iterator[Callable[..., object]]:
    """A factory of started DockerSandboxes, all cleaned up after the test."""
    from rgym_sandbox_docker.sandbox import DockerSandbox

    def build(**overrides: object) -> DockerSandbox:
        overrides.setdefault("image", image)
        labels = {**TEST_LABELS, **overrides.pop("labels", {})}  # type: ignore[dict-item]
        return DockerSandbox(SandboxConfig(run_id=overrides.pop("run_id", "docker-tests"),
                                           labels=labels, **overrides))  # type: ignore[arg-type]

    with sandbox_factory(build) as factory:
        yield factory


@pytest.fixture
def test_env(image: str) -> dict[str, str]:
    """Environment for `rgym` subprocesses: test label on containers, local base image."""
    from docker_testlib import base_image

    env = dict(os.environ)
    env["RGYM_DOCKER_LABELS"] = ",".join(f"{k}={v}" for k, v in TEST_LABELS.items())
    env["RGYM_DOCKER_BASE"] = base_image(client_or_skip())
    return env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """In CI (CI=true) a skipped Docker test is a failure: Docker must really run there."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and item.get_closest_marker("docker") is not None:
        report.outcome = "failed"
        report.longrepr = f"CI=true: Docker test skipped ({report.longrepr}); it must run in CI"

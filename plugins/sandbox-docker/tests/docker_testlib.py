"""Shared helpers of the Docker tests: reach the engine (skip locally, fail in CI),
build the test image once, and mark every container the tests cause."""

from __future__ import annotations

import functools
import os
import uuid
from typing import Any

import pytest
from rgym_sandbox_docker import images, lifecycle

#: Every container and volume the tests cause carries this label.
TEST_LABEL = ("rgym.test", "sandbox-docker")
#: This pytest session's own label, so two sessions on one engine never prune each other.
SESSION_LABEL = ("rgym.test.session", os.environ.get("RGYM_TEST_SESSION") or uuid.uuid4().hex[:12])
os.environ["RGYM_TEST_SESSION"] = SESSION_LABEL[1]  # subprocesses and workers share it
TEST_LABELS = dict([TEST_LABEL, SESSION_LABEL])
LOCAL_BASE = "rgym-local-base:latest"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def client_or_skip() -> Any:
    """The engine's client; skips the calling module without a daemon, except in CI."""
    try:
        return lifecycle.docker_client()
    except lifecycle.DockerUnavailable as exc:
        if in_ci():
            raise RuntimeError(f"CI=true but {exc}; run .ci/docker-setup.sh first") from exc
        pytest.skip(str(exc), allow_module_level=True)  # "Docker daemon not reachable at ..."


def base_image(client: Any) -> str:
    """The base the tests build on: $RGYM_DOCKER_BASE, else the local debootstrap
    image when present, else the public default."""
    if os.environ.get("RGYM_DOCKER_BASE"):
        return os.environ["RGYM_DOCKER_BASE"]
    try:
        client.images.get(LOCAL_BASE)
        return LOCAL_BASE
    except Exception:  # noqa: BLE001 - not built here
        return images.DEFAULT_BASE


@functools.cache
def episode_image() -> str:
    """The image of a task without requirements (built once, then found by tag)."""
    client = client_or_skip()
    return images.task_image(client, [], base=base_image(client))


def leftovers(client: Any) -> list[str]:
    """Names of test-labelled containers and volumes that still exist."""
    flt = {"label": [f"{k}={v}" for k, v in TEST_LABELS.items()]}
    return ([c.name for c in client.containers.list(all=True, filters=flt)]
            + [v.name for v in client.volumes.list(filters=flt)])

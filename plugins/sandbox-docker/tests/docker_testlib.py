"""Shared helpers of the Docker tests: reach the engine (skip locally, fail in CI),
build the test image once, and mark every container the tests cause."""

from __future__ import annotations

import functools
from typing import Any

from rgym_sandbox_docker import images
from rgym_sandbox_docker.testing import (
    DockerNotReady,
    base_image,
    client,
    session_label,
)

from rgym_core.testing import skip_or_fail

#: Every container and volume the tests cause carries this label.
TEST_LABEL = ("rgym.test", "sandbox-docker")
#: This pytest session's own label, so two sessions on one engine never prune each other.
SESSION_LABEL = ("rgym.test.session", session_label())  # subprocesses and workers share it
TEST_LABELS = dict([TEST_LABEL, SESSION_LABEL])


def client_or_skip() -> Any:
    """The engine's client; skips the calling module without a daemon, except in CI."""
    try:
        return client()
    except DockerNotReady as exc:
        skip_or_fail(str(exc), module=True)  # "Docker daemon not reachable at ..."


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

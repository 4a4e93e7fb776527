"""For tests that run episodes on the Docker sandbox (this plugin's and any pack's):
the engine, the base image to build on, and the environment for ``rgym run --sandbox
docker`` subprocesses, with every container they cause labelled for clean-up.

    try:
        env = episode_env("task-vision", wheels=Path("/opt/wheels"), wheel_globs=["torch-2.13.0*.whl"])
    except DockerNotReady as exc:
        skip_or_fail(str(exc))          # rgym_core.testing: skip locally, fail in CI
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgym_sandbox_docker import images, lifecycle

#: The image `.ci/docker-setup.sh` builds without Docker Hub.
LOCAL_BASE = "rgym-local-base:latest"


class DockerNotReady(RuntimeError):
    """The engine, or a local wheel a test needs, is missing; the message says which
    and how to get it."""


def client() -> Any:
    """The engine's client; :class:`DockerNotReady` when no daemon answers."""
    try:
        return lifecycle.docker_client()
    except lifecycle.DockerUnavailable as exc:
        raise DockerNotReady(f"{exc}; run .ci/docker-setup.sh to install and start it") from None


def base_image(engine: Any) -> str:
    """The base to build on: ``$RGYM_DOCKER_BASE``, else the local image of
    ``.ci/docker-setup.sh`` when present, else the public default."""
    if os.environ.get("RGYM_DOCKER_BASE"):
        return os.environ["RGYM_DOCKER_BASE"]
    try:
        engine.images.get(LOCAL_BASE)
        return LOCAL_BASE
    except Exception:  # noqa: BLE001 - not built here
        return images.DEFAULT_BASE


def session_label() -> str:
    """This test session's id (``RGYM_TEST_SESSION``, set once per process), so two
    sessions on one engine never clean up each other's containers."""
    return os.environ.setdefault("RGYM_TEST_SESSION", uuid.uuid4().hex[:12])


def episode_env(label: str, *, wheels: Path | None = None,
                wheel_globs: Sequence[str] = ()) -> dict[str, str]:
    """Environment for ``rgym run --sandbox docker`` subprocesses of a test: the base
    image, the local wheel folder pack layers install from (``wheels``, which must hold
    a file matching each of ``wheel_globs``), and the labels ``rgym.test=<label>`` and
    ``rgym.test.session=<session>`` on every container.  Raises :class:`DockerNotReady`."""
    engine = client()
    env = {"RGYM_DOCKER_BASE": base_image(engine),
           "RGYM_DOCKER_LABELS": f"rgym.test={label},rgym.test.session={session_label()}"}
    if wheels is not None:
        for pattern in wheel_globs:
            if not any(wheels.glob(pattern)):
                raise DockerNotReady(f"no wheel matching {pattern} in {wheels} "
                                     f"(set RGYM_PIP_FIND_LINKS to the folder that has it)")
        env["RGYM_PIP_FIND_LINKS"] = str(wheels)
    return env

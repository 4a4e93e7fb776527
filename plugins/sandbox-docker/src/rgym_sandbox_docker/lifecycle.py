"""Container labels, the engine client, and clean-up of left-behind containers.

Every container rgym starts carries ``rgym.managed=1`` and ``rgym.run_id=<run id>``.
Live sandboxes are tracked so that they are removed at interpreter exit and on
SIGTERM (turned into ``SystemExit`` so ``finally`` blocks run) as well as by the
runner's ``cleanup()``; ``rgym sandbox prune`` removes what a killed process left.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import weakref
from typing import Any

MANAGED_LABEL = "rgym.managed"
RUN_ID_LABEL = "rgym.run_id"
ROLE_LABEL = "rgym.role"

_live: weakref.WeakSet[Any] = weakref.WeakSet()
_installed = False
_lock = threading.Lock()


class DockerUnavailable(RuntimeError):
    """The Docker engine cannot be reached."""


def docker_client(timeout: int = 120) -> Any:
    """A client of the local engine (``DOCKER_HOST`` is honoured), or
    :class:`DockerUnavailable` with the reason and the fix."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        raise DockerUnavailable("the 'docker' Python package is not installed: "
                                "pip install docker") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - every failure means the same to the user
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DockerUnavailable(
            f"Docker daemon not reachable at {where}: {exc}. Start it (`dockerd &`, or "
            f"`.ci/docker-setup.sh` in a checkout) or set DOCKER_HOST") from exc
    return client


def env_labels() -> dict[str, str]:
    """Extra labels from ``RGYM_DOCKER_LABELS`` (``key=value,key2=value2``), for CI
    and tests to mark the containers they cause."""
    labels = {}
    for item in os.environ.get("RGYM_DOCKER_LABELS", "").split(","):
        key, sep, value = item.strip().partition("=")
        if sep and key:
            labels[key] = value
    return labels


def labels_for(run_id: str, role: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels of a container of run ``run_id`` (``role``: ``episode`` or ``grader``)."""
    labels = {**env_labels(), **(extra or {})}
    labels.update({MANAGED_LABEL: "1", RUN_ID_LABEL: run_id, ROLE_LABEL: role})
    return labels


def track(sandbox: Any) -> None:
    """Remember a live sandbox so it is cleaned up at exit and on SIGTERM."""
    global _installed
    with _lock:
        _live.add(sandbox)
        if _installed:
            return
        _installed = True
    atexit.register(cleanup_all)
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)


def untrack(sandbox: Any) -> None:
    with _lock:
        _live.discard(sandbox)


def cleanup_all() -> None:
    """Clean up every live sandbox of this process (idempotent)."""
    for sandbox in list(_live):
        try:
            sandbox.cleanup()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _on_sigterm(signum: int, frame: Any) -> None:
    cleanup_all()
    raise SystemExit(128 + signum)


def prune(client: Any, *, run_id: str | None = None, labels: dict[str, str] | None = None,
          ) -> tuple[list[str], list[str]]:
    """Remove containers and volumes labelled ``rgym.managed=1`` (and ``run_id`` /
    extra ``labels`` when given); return the names removed."""
    filters = [f"{MANAGED_LABEL}=1"]
    if run_id:
        filters.append(f"{RUN_ID_LABEL}={run_id}")
    filters += [f"{k}={v}" for k, v in (labels or {}).items()]
    containers, volumes = [], []
    for container in client.containers.list(all=True, filters={"label": filters}):
        try:
            container.remove(force=True, v=True)
            containers.append(container.name)
        except Exception as exc:  # noqa: BLE001 - already being removed
            if "already in progress" not in str(exc) and "No such container" not in str(exc):
                raise
    for volume in client.volumes.list(filters={"label": filters}):
        volume.remove(force=True)
        volumes.append(volume.name)
    return containers, volumes

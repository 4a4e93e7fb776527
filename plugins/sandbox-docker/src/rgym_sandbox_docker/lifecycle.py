"""Container labels, the engine client, owners, and clean-up of left-behind containers.

Every container rgym starts carries ``rgym.managed=1``, ``rgym.run_id=<run id>``,
``rgym.role`` and its **owner**: the host name, the boot id of that host, the pid
of the rgym process, that process's start time and its pid namespace.  A
container's owner is *gone* when, on the same host, boot and pid namespace, no
process has that pid with that start time (or the host was rebooted); ``rgym
sandbox prune`` removes only containers whose owner is gone, so a live episode is
never killed by it.  Owners on other hosts or in other pid namespaces (rgym run
inside a container) cannot be checked from here: their containers count as live.

Live sandboxes are also tracked in-process so that they are removed at interpreter
exit and on SIGTERM (turned into ``SystemExit`` so ``finally`` blocks run) as well
as by the runner's ``cleanup()``.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import socket
import threading
import weakref
from typing import Any

from attrs import define

MANAGED_LABEL = "rgym.managed"
RUN_ID_LABEL = "rgym.run_id"
ROLE_LABEL = "rgym.role"
OWNER_HOST_LABEL = "rgym.owner.host"
OWNER_BOOT_LABEL = "rgym.owner.boot"
OWNER_PID_LABEL = "rgym.owner.pid"
OWNER_START_LABEL = "rgym.owner.start"
OWNER_PIDNS_LABEL = "rgym.owner.pidns"

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


# -- owners --------------------------------------------------------------------------


def pid_namespace() -> str:
    """This process's pid namespace (its inode): pids mean something only inside it."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@functools.cache
def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()[19]


@define(frozen=True)
class Owner:
    """The process a container belongs to."""

    host: str
    boot: str
    pid: int
    start: str
    pidns: str = ""

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        return cls(host=socket.gethostname(), boot=boot_id(), pid=pid,
                   start=process_start(pid) or "", pidns=pid_namespace())

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Owner | None:
        try:
            return cls(host=labels[OWNER_HOST_LABEL], boot=labels.get(OWNER_BOOT_LABEL, ""),
                       pid=int(labels[OWNER_PID_LABEL]), start=labels.get(OWNER_START_LABEL, ""),
                       pidns=labels.get(OWNER_PIDNS_LABEL, ""))
        except (KeyError, ValueError):
            return None

    def labels(self) -> dict[str, str]:
        return {OWNER_HOST_LABEL: self.host, OWNER_BOOT_LABEL: self.boot,
                OWNER_PID_LABEL: str(self.pid), OWNER_START_LABEL: self.start,
                OWNER_PIDNS_LABEL: self.pidns}

    def state(self) -> str:
        """``alive``, ``gone`` or ``unknown`` (another host, or another pid namespace
        on this one: its pid cannot be checked from here)."""
        if self.host != socket.gethostname():
            return "unknown"
        if self.boot and boot_id() and self.boot != boot_id():
            return "gone"  # the machine was rebooted since
        if self.pidns and pid_namespace() and self.pidns != pid_namespace():
            return "unknown"
        start = process_start(self.pid)
        if start is None or (self.start and start != self.start):
            return "gone"
        return "alive"


def labels_for(run_id: str, role: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels of a container of run ``run_id`` (``role``: ``episode`` or ``grader``),
    owned by this process."""
    labels = {**env_labels(), **(extra or {})}
    labels.update({MANAGED_LABEL: "1", RUN_ID_LABEL: run_id, ROLE_LABEL: role})
    labels.update(Owner.me().labels())
    return labels


# -- in-process tracking ---------------------------------------------------------------


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


# -- prune ------------------------------------------------------------------------------


@define
class Leftover:
    """A managed container or volume, and whether its owner is still there."""

    kind: str  # container | volume
    name: str
    run_id: str
    role: str
    owner: Owner | None
    state: str  # alive | gone | unknown | no-owner
    obj: Any

    def describe(self) -> str:
        who = (f"pid {self.owner.pid} on {self.owner.host}" if self.owner else "no owner recorded")
        return f"{self.kind} {self.name} (run {self.run_id or '?'}, {self.role or '?'}; {who})"


def _filters(run_id: str | None, labels: dict[str, str] | None) -> dict[str, list[str]]:
    filters = [f"{MANAGED_LABEL}=1"]
    if run_id:
        filters.append(f"{RUN_ID_LABEL}={run_id}")
    filters += [f"{k}={v}" for k, v in (labels or {}).items()]
    return {"label": filters}


def find_leftovers(client: Any, *, run_id: str | None = None,
                   labels: dict[str, str] | None = None) -> list[Leftover]:
    """Every managed container and volume (filtered by ``run_id`` / ``labels``), with
    the state of its owner.  Containers created before owners were recorded count as
    ``no-owner``: they are treated as live."""
    found = []
    flt = _filters(run_id, labels)
    for container in client.containers.list(all=True, filters=flt):
        lab = container.labels or {}
        owner = Owner.from_labels(lab)
        found.append(Leftover("container", container.name, lab.get(RUN_ID_LABEL, ""),
                              lab.get(ROLE_LABEL, ""), owner,
                              owner.state() if owner else "no-owner", container))
    for volume in client.volumes.list(filters=flt):
        # rgym's own volumes are anonymous and go with their container; a labelled
        # volume is removable once its owner is gone (or it has none): the engine
        # refuses to remove one a container still uses.
        lab = volume.attrs.get("Labels") or {}
        owner = Owner.from_labels(lab)
        state = owner.state() if owner else "gone"
        found.append(Leftover("volume", volume.name, lab.get(RUN_ID_LABEL, ""),
                              lab.get(ROLE_LABEL, ""), owner, state, volume))
    return found


def remove(item: Leftover) -> bool:
    """Remove one container (and its anonymous volumes) or volume; False if it was
    already gone."""
    try:
        if item.kind == "container":
            item.obj.remove(force=True, v=True)
        else:
            item.obj.remove(force=True)
        return True
    except Exception as exc:  # noqa: BLE001 - already gone, or being removed
        text = str(exc)
        if ("already in progress" in text or "No such" in text or "not found" in text.lower()
                or "in use" in text):
            return False
        raise


def prune(client: Any, *, run_id: str | None = None, labels: dict[str, str] | None = None,
          include_live: bool = False) -> tuple[list[str], list[str]]:
    """Remove managed containers and volumes whose owner is gone (all of them with
    ``include_live``); return the names of the containers and volumes removed."""
    containers: list[str] = []
    volumes: list[str] = []
    for item in find_leftovers(client, run_id=run_id, labels=labels):
        if item.state != "gone" and not include_live:
            continue
        if remove(item):
            (containers if item.kind == "container" else volumes).append(item.name)
    return containers, volumes

"""Killing what a local episode left running after rgym itself died.

When the rgym process is killed (``kill -9``, a crash), nothing stops the agent's
detached processes in ``uid`` or ``none`` mode (under bubblewrap the keeper sees
its control pipe close and takes the whole pid namespace with it).  The runner
writes :func:`handle_of` into the trajectory when the sandbox starts, and
``rgym grade`` calls :func:`reap` with it before it copies the workspace, so no
process of the episode can change a file after the snapshot.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from rgym_core.sandboxes.local import procs
from rgym_core.sandboxes.local.confinement import (
    MODE_BUBBLEWRAP,
    MODE_UID,
    SANDBOX_ID_VAR,
    Confinement,
)

__all__ = ["boot_id", "handle_of", "reap"]


def boot_id() -> str:
    """This boot's id (pids and namespaces of another boot mean nothing now)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def handle_of(conf: Confinement) -> dict[str, Any]:
    """What :func:`reap` needs to find the episode's processes (JSON-safe)."""
    return {"backend": "local", "mode": conf.mode, "uid": conf.uid,
            "sandbox_id": conf.sandbox_id, "pid_namespace": conf.pid_ns,
            "keeper_pid": conf.keeper_pid, "boot_id": boot_id(),
            "lock_path": str(conf.lease.lock_path) if conf.lease is not None else None}


def _uid_free(lock_path: str | None) -> bool:
    """True when no live episode holds the uid's lease now (another episode that
    leased it since has already swept what the dead one left)."""
    if not lock_path:
        return True
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock when we got it
    return True


def reap(handle: dict[str, Any]) -> list[str]:
    """Kill every process the episode of ``handle`` still runs; return their command
    lines.  A handle of another boot, or a uid another episode holds now, kills
    nothing."""
    if handle.get("backend") != "local" or handle.get("boot_id") != boot_id():
        return []
    mode = handle.get("mode")
    match: Any
    if mode == MODE_BUBBLEWRAP:
        ns, keeper = handle.get("pid_namespace"), handle.get("keeper_pid")
        if not isinstance(ns, int):
            return []

        def match(pid: int) -> bool:
            return pid != keeper and procs.pid_namespace(pid) == ns
    elif mode == MODE_UID:
        uid = handle.get("uid")
        if not isinstance(uid, int) or uid == 0 or not _uid_free(handle.get("lock_path")):
            return []

        def match(pid: int) -> bool:
            return procs.uid_of(pid) == uid
    else:
        sandbox_id = handle.get("sandbox_id")
        if not isinstance(sandbox_id, str) or not sandbox_id:
            return []
        needle = procs.needle(SANDBOX_ID_VAR, sandbox_id)

        def match(pid: int) -> bool:
            return procs.uid_of(pid) == os.getuid() and procs.environ_has(pid, needle)

    return [name for _, name in procs.kill_named(match) if name]

"""Hiding a task's files from agent code that reads the host's file system.

Sandboxes with their own view of the file system (bubblewrap, containers) never
show an agent the task's grader folder, its ``grader.include`` files or the private
parts of its datasets.  Two set-ups run agent code as a leased unprivileged uid
straight on the host's file system (root without bubblewrap): the local sandbox's
``uid`` mode (:func:`agent_reads_host_files`) and ``--agent-isolation process``
(:func:`agent_process_reads_host_files`).  There file modes are all that keeps
those files from the agent, so the grader and the runner close them to "others"
for the episode (:func:`hide_task_files`, :class:`HiddenFromOthers`) and give
every file its own mode back when the last episode that needs it ends, even one
that was killed (:func:`restore_abandoned`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from rgym_core.isolation.agent_confinement import confinement
from rgym_core.sandbox import Sandbox
from rgym_core.specs import PreparedDataset, TaskSpec


def agent_reads_host_files(sandbox: Sandbox) -> bool:
    """True when the sandbox runs agent commands as another uid straight on the
    host's file system (the local sandbox's ``uid`` mode: root without bubblewrap),
    where file modes are all that keeps them from a task's hidden files."""
    if os.geteuid() != 0:
        return False
    try:
        mode = getattr(sandbox, "mode", None)
    except Exception:  # noqa: BLE001 - not started
        return False
    return mode == "uid"


def hidden_task_paths(task: TaskSpec, datasets: Mapping[str, PreparedDataset]) -> list[Path]:
    """What an agent must not read: the task's grader folder, its ``grader.include``
    files (but a starter file shared with the grader) and the private dataset parts."""
    grader_dir = task.path(task.grader.files)
    paths = [grader_dir] if grader_dir is not None and grader_dir.is_dir() else []
    starters = [folder for _, folder in task.starter_paths() if folder is not None]  # resolved
    for source in _include_sources(task):
        if not any(source.is_relative_to(starter) for starter in starters):
            paths.append(source)
    paths += [p.private for p in datasets.values() if p.private is not None]
    return paths


def _include_sources(task: TaskSpec) -> list[Path]:
    """The resolved sources of the task's ``grader.include`` files that exist (the
    grading refuses the task when one is missing or its target leaves the grader
    folder: :func:`rgym_core.grading.resolve_includes`)."""
    out: list[Path] = []
    for source in task.grader.include:
        path = task.path(source)
        if path is not None and path.exists():
            out.append(path.resolve())
    return out


def hide_task_files(task: TaskSpec, datasets: Mapping[str, PreparedDataset]) -> HiddenFromOthers:
    """Close :func:`hidden_task_paths` to other users until ``.release()``."""
    return HiddenFromOthers(hidden_task_paths(task, datasets))


def agent_process_reads_host_files(agent_isolation: str) -> bool:
    """True when ``--agent-isolation process`` runs the scaffold as a leased uid
    straight on the host's file system (root without bubblewrap)."""
    if agent_isolation != "process" or os.geteuid() != 0:
        return False
    try:
        mode = confinement().mode
    except Exception:  # noqa: BLE001 - the agent's start reports it
        return False
    return mode == "uid"


#: Where root keeps the original modes of folders closed during episodes.
GUARD_DIR = Path(os.environ.get("RGYM_GUARD_DIR", "/var/lib/rgym/hidden"))  # survives a reboot


def _tree_modes(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for sub in [path, *path.rglob("*")] if path.is_dir() else [path]:
        try:
            st = sub.lstat()
        except OSError:
            continue
        if not stat.S_ISLNK(st.st_mode):
            out[str(sub.relative_to(path)) if sub != path else "."] = stat.S_IMODE(st.st_mode)
    return out


class HiddenFromOthers:
    """Remove the permissions of "others" (``o-rwx``) on folder trees (or files) for
    as long as an episode needs it, and give every file its own mode back when the
    last holder on this machine releases it.

    Installed packs are never left changed: the original modes are kept in
    :data:`GUARD_DIR` (``<sha>.json``) before anything changes, each live holder
    holds an ``flock`` on its own file (``<sha>.holders/``), and the last one to
    release restores the modes; a holder that died (SIGKILL) is noticed by the next
    episode or release, which restores for it (:func:`restore_abandoned`).  Owner and
    group keep their access (the agent's uid has neither)."""

    def __init__(self, paths: list[Path]) -> None:
        GUARD_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
        restore_abandoned()
        self._held: list[tuple[Path, int]] = []
        unique = sorted({Path(p).resolve() for p in paths})
        # A path inside another one is covered by it (and recording it after the outer
        # one changed it would record changed modes).
        outer = [p for p in unique if not any(p != q and p.is_relative_to(q) for q in unique)]
        try:
            for path in outer:
                self._hide(path)
        except BaseException:
            self.release()  # what was closed so far gets its modes back
            raise

    def _hide(self, path: Path) -> None:
        key = _guard_key(path)
        with _locked(key):
            record = GUARD_DIR / f"{key}.json"
            if not record.exists():
                _write_atomic(record, json.dumps({"path": str(path), "modes": _tree_modes(path)}))
            holders = GUARD_DIR / f"{key}.holders"
            holders.mkdir(exist_ok=True, mode=0o700)
            fd = os.open(holders / f"{os.getpid()}-{id(self)}-{time.monotonic_ns()}",
                         os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._held.append((path, fd))
            for name, mode in _tree_modes(path).items():
                target = path if name == "." else path / name
                try:
                    os.chmod(target, mode & ~0o007)
                except OSError:
                    pass

    def release(self) -> None:
        held, self._held = self._held, []
        for path, fd in reversed(held):
            key = _guard_key(path)
            with _locked(key):
                holder = Path(os.readlink(f"/proc/self/fd/{fd}"))
                os.close(fd)
                holder.unlink(missing_ok=True)
                _restore_if_unheld(key)


def _guard_key(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:32]


@contextlib.contextmanager
def _locked(key: str) -> Iterator[None]:
    fd = os.open(GUARD_DIR / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _restore_if_unheld(key: str) -> bool:
    """With the key's lock held: drop dead holders; when none is left, restore the
    recorded modes and forget them.  True when restored."""
    holders = GUARD_DIR / f"{key}.holders"
    for entry in list(holders.iterdir()) if holders.is_dir() else []:
        fd = os.open(entry, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live holder
        finally:
            os.close(fd)
        entry.unlink(missing_ok=True)  # its holder died
    record = GUARD_DIR / f"{key}.json"
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return False
    root = Path(data["path"])
    for name, mode in data["modes"].items():
        target = root if name == "." else root / name
        try:
            if not target.is_symlink():
                os.chmod(target, mode)
        except OSError:
            pass
    record.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        holders.rmdir()
    return True


def restore_abandoned() -> list[str]:
    """Restore the modes of trees whose every holder died; return their paths."""
    out: list[str] = []
    if not GUARD_DIR.is_dir():
        return out
    for record in GUARD_DIR.glob("*.json"):
        key = record.stem
        with _locked(key):
            try:
                path = json.loads(record.read_text())["path"]
            except (OSError, ValueError, KeyError):
                continue
            if _restore_if_unheld(key):
                out.append(path)
    return out


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def restrict_to_owner(path: Path) -> None:
    """chmod a folder tree to its owner only (dirs 0700, files 0600).  Never use it on
    an installed pack (see :class:`HiddenFromOthers`)."""
    for sub in [path, *path.rglob("*")]:
        if sub.is_symlink():
            continue
        try:
            os.chmod(sub, 0o700 if sub.is_dir() else 0o600)
        except OSError:
            pass


__all__ = ["GUARD_DIR", "HiddenFromOthers", "agent_process_reads_host_files", "agent_reads_host_files",
           "hidden_task_paths", "hide_task_files", "restore_abandoned", "restrict_to_owner"]

"""Workspace snapshots: the one copy of a workspace that a grading grades and the
run directory keeps.

Every grading works on a snapshot taken in one step: the episode's processes are
frozen while the workspace is copied out (``validate``), or killed first (the final
grading, and ``rgym grade`` of a killed run), so nothing the agent left running can
change a file between the copy that is graded and the copy that is archived.  The
grader then grades exactly that copy, and the run directory keeps exactly those
bytes: the final snapshot as ``workspace.tar.gz``, each validate snapshot as
``snapshots/<sha256>.tar.gz`` (named by its digest, so a repeat costs nothing).

A snapshot's identity is :func:`tree_digest`: SHA-256 over one line per entry,
sorted by path (POSIX, relative, written as a JSON string so that no name, not even
one holding a newline, can read as two entries)::

    d "<path>"                          a folder
    f "<path>" <x|-> <sha256 of bytes>  a regular file (x: executable by its owner)

Links and special files never enter a snapshot (the export rules of
:mod:`rgym_core.workspace_export` drop them) and are not counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from attrs import define

from rgym_core.records import SnapshotInfo
from rgym_core.sandbox import Sandbox

__all__ = ["SNAPSHOT_DIR", "Snapshot", "SnapshotMode", "archive_digest", "restore_snapshot",
           "snapshot_archive", "store_snapshot", "take_snapshot", "tree_digest"]

#: The run directory's folder of validate snapshots.
SNAPSHOT_DIR = "snapshots"
_CHUNK = 1 << 20

#: ``freeze``: stop the agent's processes for the copy and let them go on after it;
#: ``kill``: kill them before the copy; ``none``: copy as it is (nothing runs there).
SnapshotMode = Literal["freeze", "kill", "none"]


@define
class Snapshot:
    """A workspace copy on the host (``path``, owned by rgym) and what it is."""

    path: Path
    info: SnapshotInfo


def _entries(folder: Path) -> Iterator[tuple[str, os.stat_result, Path]]:
    for base, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(base) / name
            yield path.relative_to(folder).as_posix(), path.lstat(), path


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(folder: Path) -> str:
    """The snapshot digest of a host folder (see the module docstring)."""
    return _digest(folder)[0]


def _digest(folder: Path) -> tuple[str, int, int]:
    """``(digest, regular files, bytes)`` of ``folder``."""
    lines: list[tuple[str, str]] = []
    files = size = 0
    for rel, st, path in _entries(Path(folder)):
        name = json.dumps(rel, ensure_ascii=True)
        if stat.S_ISDIR(st.st_mode):
            lines.append((rel, f"d {name}"))
        elif stat.S_ISREG(st.st_mode):
            executable = "x" if st.st_mode & stat.S_IXUSR else "-"
            lines.append((rel, f"f {name} {executable} {_file_sha256(path)}"))
            files += 1
            size += st.st_size
    lines.sort()
    text = "".join(f"{line}\n" for _, line in lines)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest, files, size


def archive_digest(archive: Path) -> str:
    """The digest of a ``workspace.tar.gz``'s ``workspace/`` tree, unpacked under the
    hostile-archive rules (:func:`rgym_core.rundir.extract_workspace`)."""
    from rgym_core.rundir import extract_workspace

    with tempfile.TemporaryDirectory(prefix="rgym-digest-") as tmp:
        return tree_digest(extract_workspace(Path(archive), Path(tmp) / "workspace"))


def take_snapshot(sandbox: Sandbox, dest: Path, *, mode: SnapshotMode,
                  exclude: Sequence[str] = (), include: Sequence[str] | None = None,
                  quota_bytes: int | None = None,
                  keep: Callable[[Path], None] | None = None) -> Snapshot:
    """Copy the workspace into the new host folder ``dest`` as one snapshot.

    ``mode`` says what happens to the agent's processes (see :data:`SnapshotMode`);
    a backend that cannot freeze or kill is copied as it is, and the record says so
    (``frozen``/``after_kill`` false).  ``exclude``/``include`` are the export's
    globs (:meth:`Sandbox.export_workspace`); ``keep(dest)``, when given, trims the
    copy further before its digest is taken."""
    from rgym_core.rundir import export_workspace

    frozen = after_kill = False
    killed: list[str] = []
    if mode == "kill":
        try:
            killed = list(sandbox.kill_processes())
            after_kill = True
        except NotImplementedError:
            pass
    elif mode == "freeze":
        try:
            sandbox.freeze()
            frozen = True
        except NotImplementedError:
            pass
    try:
        export_workspace(sandbox, dest, exclude=exclude, include=include, quota_bytes=quota_bytes)
    finally:
        if frozen:
            sandbox.thaw()
    dest.mkdir(exist_ok=True)
    if keep is not None:
        keep(dest)
    digest, files, size = _digest(dest)
    return Snapshot(dest, SnapshotInfo(sha256=digest, frozen=frozen, after_kill=after_kill,
                                       killed=killed, files=files, bytes=size))


def snapshot_archive(run_dir: Path, sha256: str) -> Path:
    """Where a validate snapshot with this digest is kept in a run directory."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a snapshot digest: {sha256!r}")
    return Path(run_dir) / SNAPSHOT_DIR / f"{sha256}.tar.gz"


def store_snapshot(snapshot: Snapshot, run_dir: Path) -> Path:
    """Keep ``snapshot`` in ``run_dir/snapshots/`` (once per digest) and return the
    archive's path."""
    from rgym_core.rundir import archive_folder

    target = snapshot_archive(run_dir, snapshot.info.sha256)
    if not target.exists():
        target.parent.mkdir(exist_ok=True)
        archive_folder(snapshot.path, target)
    return target


def restore_snapshot(archive: Path, dest: Path, *, expect: str | None = None) -> Snapshot:
    """Unpack a kept snapshot (``workspace.tar.gz`` or ``snapshots/<sha>.tar.gz``)
    into the new folder ``dest``; ``ValueError`` when ``expect`` is given and the
    unpacked tree's digest is another."""
    from rgym_core.rundir import extract_workspace

    extract_workspace(Path(archive), Path(dest))
    digest, files, size = _digest(Path(dest))
    if expect is not None and digest != expect:
        shutil.rmtree(dest, ignore_errors=True)
        raise ValueError(f"{archive}: the snapshot's digest is {digest[:12]}..., but the "
                         f"grading recorded {expect[:12]}...: the archive is not what was graded")
    return Snapshot(Path(dest), SnapshotInfo(sha256=digest, files=files, bytes=size))

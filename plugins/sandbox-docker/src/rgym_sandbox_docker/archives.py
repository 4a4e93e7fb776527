"""Tar archives into containers, with the owners and modes rgym wants (the agent's
files; read-only, root-owned datasets).  Archives *out* of a container come from
the agent's side and are unpacked by the core's hostile-archive extractor,
:func:`rgym_core.workspace_export.extract_archive`."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO

AGENT_UID = 1000
AGENT_GID = 1000


def _owned(info: tarfile.TarInfo, uid: int, gid: int, read_only: bool) -> tarfile.TarInfo:
    info.uid, info.gid = uid, gid
    info.uname = info.gname = "agent" if uid == AGENT_UID else "root"
    info.mode &= 0o777  # never setuid/setgid/sticky bits from the host
    if read_only:
        info.mode = 0o555 if info.isdir() or info.mode & 0o111 else 0o444
    return info


class ArchiveBuilder:
    """Builds a tar (in a temporary file) of host files, with chosen owners."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="rgym-tar-")
        self.tar = tarfile.open(fileobj=self.file, mode="w", format=tarfile.GNU_FORMAT)

    def add_dir(self, dest: str, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                mode: int = 0o755) -> None:
        """Add one empty folder entry named ``dest``."""
        info = tarfile.TarInfo(dest.lstrip("/") or ".")
        info.type = tarfile.DIRTYPE
        info.mode = mode
        self.tar.addfile(_owned(info, uid, gid, read_only=False))

    def add_tree(self, src: Path, dest: str, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                 read_only: bool = False) -> None:
        """Add ``src`` (file or folder, recursively) under the name ``dest``."""
        self.tar.add(str(src), arcname=dest.lstrip("/") or ".", recursive=True,
                     filter=lambda info: _owned(info, uid, gid, read_only))

    def add_bytes(self, dest: str, data: bytes, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                  mode: int = 0o644) -> None:
        info = tarfile.TarInfo(dest.lstrip("/"))
        info.size = len(data)
        info.mode = mode
        self.tar.addfile(_owned(info, uid, gid, read_only=False), io.BytesIO(data))

    def finish(self) -> IO[bytes]:
        """Close the archive and return the file, rewound."""
        self.tar.close()
        self.file.seek(0)
        return self.file

    def size(self) -> int:
        return os.fstat(self.file.fileno()).st_size


def parents_below(root: str, path: str) -> Iterable[str]:
    """The folders strictly between ``root`` and ``path`` (``root/a``, ``root/a/b``)."""
    rel = PurePosixPath(path).relative_to(root)
    current = PurePosixPath(root)
    for part in rel.parts[:-1]:
        current = current / part
        yield str(current)

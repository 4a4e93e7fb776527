"""Tar archives for moving files in and out of containers with the right owners."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

AGENT_UID = 1000
AGENT_GID = 1000


def _owned(info: tarfile.TarInfo, uid: int, gid: int, read_only: bool) -> tarfile.TarInfo:
    info.uid, info.gid = uid, gid
    info.uname = info.gname = "agent" if uid == AGENT_UID else "root"
    if read_only:
        info.mode = 0o555 if info.isdir() or info.mode & 0o111 else 0o444
    return info


class ArchiveBuilder:
    """Builds a tar (in a temporary file) to extract at ``/`` in a container."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="rgym-tar-")
        self.tar = tarfile.open(fileobj=self.file, mode="w")

    def add_dir(self, dest: str, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                mode: int = 0o755) -> None:
        """Add one empty folder entry at the absolute path ``dest``."""
        info = tarfile.TarInfo(dest.lstrip("/"))
        info.type = tarfile.DIRTYPE
        info.mode = mode
        self.tar.addfile(_owned(info, uid, gid, read_only=False))

    def add_tree(self, src: Path, dest: str, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                 read_only: bool = False) -> None:
        """Add ``src`` (file or folder, recursively) at the absolute path ``dest``."""
        self.tar.add(str(src), arcname=dest.lstrip("/"), recursive=True,
                     filter=lambda info: _owned(info, uid, gid, read_only))

    def add_bytes(self, dest: str, data: bytes, *, uid: int = AGENT_UID, gid: int = AGENT_GID,
                  mode: int = 0o644) -> None:
        import io

        info = tarfile.TarInfo(dest.lstrip("/"))
        info.size = len(data)
        info.mode = mode
        self.tar.addfile(_owned(info, uid, gid, read_only=False), io.BytesIO(data))

    def finish(self) -> IO[bytes]:
        """Close the archive and return the file, rewound."""
        self.tar.close()
        self.file.seek(0)
        return self.file


def parents_below(root: str, path: str) -> Iterable[str]:
    """The folders strictly between ``root`` and ``path`` (``root/a``, ``root/a/b``)."""
    rel = PurePosixPath(path).relative_to(root)
    current = PurePosixPath(root)
    for part in rel.parts[:-1]:
        current = current / part
        yield str(current)


def _host_owned(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    member = tarfile.data_filter(member, dest)
    return member.replace(uid=os.getuid(), gid=os.getgid(), uname="", gname="", deep=False)


def extract_stream(chunks: Iterator[bytes], dest: Path) -> None:
    """Extract a ``get_archive`` stream whose single top entry becomes ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rgym-out-", dir=dest.parent) as tmp:
        spool = Path(tmp) / "archive.tar"
        with open(spool, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        out = Path(tmp) / "out"
        out.mkdir()
        with tarfile.open(spool) as tar:
            members = tar.getmembers()
            tar.extractall(out, members=members,
                           filter=lambda m, p: _host_owned(m, p))
        top = {PurePosixPath(m.name).parts[0] for m in members if m.name not in ("", ".")}
        if len(top) != 1:
            raise OSError(f"unexpected archive layout from the container: {sorted(top)}")
        produced = out / top.pop()
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
        shutil.move(str(produced), str(dest))

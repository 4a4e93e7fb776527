"""Tar archives into and out of containers.

Into a container: :class:`ArchiveBuilder` writes archives with the owners and
modes rgym wants (the agent's files, read-only root-owned datasets).

Out of a container: :func:`extract_workspace` unpacks a tar stream that came from
the agent's side, so every name and entry in it is hostile.  It never spools the
stream to disk, never follows or creates links, keeps only regular files and
folders under the destination, bounds the bytes written by a quota (apparent
sizes: a 2 GiB sparse file counts as 2 GiB) and writes holes, not zeros, so
sparse files stay sparse on the host.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO

from attrs import define, field

AGENT_UID = 1000
AGENT_GID = 1000
_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


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


# -- extraction of hostile archives --------------------------------------------------


class WorkspaceQuotaExceeded(OSError):
    """The files to copy out are larger than the quota."""

    def __init__(self, quota_bytes: int, seen_bytes: int) -> None:
        super().__init__(f"the workspace holds more than the copy-out quota of "
                         f"{quota_bytes / 2**20:.0f} MiB (at least {seen_bytes / 2**20:.0f} MiB "
                         f"of files): delete large files (checkpoints, caches) and try again")
        self.quota_bytes = quota_bytes
        self.seen_bytes = seen_bytes


@define
class Extracted:
    """What :func:`extract_workspace` wrote and what it refused."""

    files: int = 0
    dirs: int = 0
    bytes: int = 0
    disk_bytes: int = 0
    skipped: list[tuple[str, str]] = field(factory=list)

    def skip(self, name: str, why: str) -> None:
        if len(self.skipped) < 500:
            self.skipped.append((name, why))


def safe_name(name: str) -> str | None:
    """The relative name an archive member may take, or None to refuse it: no
    absolute paths, no ``..``, no control characters (newlines included)."""
    if not name or "\x00" in name:
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return None
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, fd: int) -> int:
    """Copy a regular member's data into ``fd`` without writing zeros (holes stay
    holes); returns the bytes of data actually written."""
    source = tar.extractfile(member)
    assert source is not None
    written = 0
    if member.sparse:  # the archive says where the data is: write only that
        # (the unbuffered reader: a stream's buffered one refuses to seek, though
        # moving forward through the map is all this needs)
        source = getattr(source, "raw", source)
        for offset, size in member.sparse:
            source.seek(offset)
            left, pos = size, offset
            while left:
                data = source.read(min(left, _CHUNK))
                if not data:
                    raise OSError(f"{member.name}: the archive ended inside the file")
                if data != _ZEROS[:len(data)]:
                    os.pwrite(fd, data, pos)
                    written += len(data)
                pos += len(data)
                left -= len(data)
    else:
        pos = 0
        while True:
            data = source.read(_CHUNK)
            if not data:
                break
            if data != _ZEROS[:len(data)]:
                os.pwrite(fd, data, pos)
                written += len(data)
            pos += len(data)
        if pos != member.size:
            raise OSError(f"{member.name}: the archive ended inside the file")
    os.ftruncate(fd, member.size)
    return written


def extract_workspace(stream: IO[bytes], dest: Path, *, quota_bytes: int | None = None,
                      report: Extracted | None = None) -> Extracted:
    """Unpack the tar ``stream`` (read sequentially, never spooled) into ``dest``,
    which must not exist or be empty.  Names are relative to ``dest`` (``.`` is
    ``dest`` itself).  Refused entries are listed in the report; more than
    ``quota_bytes`` of files raises :class:`WorkspaceQuotaExceeded`."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = report or Extracted()
    regular: dict[str, Path] = {}
    dirs = {""}
    total = 0
    with tarfile.open(fileobj=stream, mode="r|", bufsize=_CHUNK) as tar:
        for member in tar:
            name = safe_name(member.name)
            if name is None:
                out.skip(repr(member.name), "unsafe name")
                continue
            if name == "":
                continue  # the top folder: dest itself
            parent, _, _ = name.rpartition("/")
            if parent not in dirs:
                out.skip(name, "its folder was not copied")
                continue
            target = dest / name
            if member.isdir():
                try:
                    os.mkdir(target, 0o755)
                except FileExistsError:
                    if not stat.S_ISDIR(os.lstat(target).st_mode):
                        out.skip(name, "a file of the same name came first")
                        continue
                dirs.add(name)
                out.dirs += 1
                continue
            if member.islnk():  # a hard link: a copy, when its target is a file already here
                link = safe_name(member.linkname)
                if link is None or link not in regular:
                    out.skip(name, "hard link to a file outside the copy")
                    continue
                size = regular[link].stat().st_size
                total += size
                if quota_bytes is not None and total > quota_bytes:
                    raise WorkspaceQuotaExceeded(quota_bytes, total)
                _copy_sparse(regular[link], target, out, name)
                regular[name] = target
                continue
            if not member.isreg():
                kind = "symbolic link" if member.issym() else "not a regular file or folder"
                out.skip(name, kind)
                continue
            total += member.size
            if quota_bytes is not None and total > quota_bytes:
                raise WorkspaceQuotaExceeded(quota_bytes, total)
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o755 if member.mode & 0o111 else 0o644)
            except FileExistsError:
                out.skip(name, "duplicate name")
                continue
            try:
                out.disk_bytes += _write_member(tar, member, fd)
            finally:
                os.close(fd)
            try:
                os.utime(target, (member.mtime, member.mtime))
            except (OSError, OverflowError, ValueError):
                pass
            regular[name] = target
            out.files += 1
            out.bytes += member.size
    return out


def _copy_sparse(src: Path, target: Path, out: Extracted, name: str) -> None:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        out.skip(name, "duplicate name")
        return
    try:
        with open(src, "rb") as fh:
            pos = 0
            while True:
                data = fh.read(_CHUNK)
                if not data:
                    break
                if data != _ZEROS[:len(data)]:
                    os.pwrite(fd, data, pos)
                    out.disk_bytes += len(data)
                pos += len(data)
            os.ftruncate(fd, pos)
    finally:
        os.close(fd)
    out.files += 1
    out.bytes += src.stat().st_size

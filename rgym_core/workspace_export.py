"""Copy a workspace out of a sandbox without trusting anything the agent chose.

Every backend produces a tar stream of the workspace (written by a process the
agent may have tampered with) and hands it to :func:`extract_archive`, which
builds a fresh host folder from it under these rules:

* **Names** are checked, never interpreted: absolute names, empty components,
  ``.`` and ``..`` components, control characters (newlines included), names
  that are not UTF-8, and over-long names are dropped (and reported).
* **Types**: only regular files and folders are created.  A hard link becomes a
  second name of a file extracted before it; a symbolic link that stays inside
  the workspace and ends at a regular file becomes a hard link to that file (no
  symlink is ever created, so nothing can redirect a later write or a grader's
  read); every other link, device, FIFO or socket is dropped.
* **Size**: the apparent size of every file (a sparse file counts in full) is
  added up and :class:`WorkspaceQuotaExceeded` is raised as soon as the total
  passes the quota, before that file is written.  Holes of sparse entries and
  runs of zero bytes are skipped with ``seek``, so a 2 GiB sparse file never
  costs 2 GiB of host disk; nothing is spooled: the stream is extracted as it
  is read.
* **Modes** are normalised (files 0644 or 0755, folders 0755, no set-id bits)
  and everything belongs to the extracting user.

``exclude`` and ``include`` are glob patterns on relative POSIX paths (a
leading ``**/`` also matches no folder).  An excluded folder is skipped whole;
with ``include``, only files matching one of its patterns are kept.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import tarfile
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from attrs import define, field

from rgym_core.globs import glob_match

#: Entries of one export before it is refused (inodes are a resource too).
DEFAULT_MAX_ENTRIES = 1_000_000
_CHUNK = 256 * 1024
_NAME_MAX = 255
_PATH_MAX = 4096


class WorkspaceExportError(OSError):
    """The workspace could not be copied out (unreadable or corrupt archive...)."""


class WorkspaceQuotaExceeded(WorkspaceExportError):
    """The workspace holds more than its quota (``resources.disk_mb``)."""

    def __init__(self, message: str, *, quota_bytes: int, seen_bytes: int) -> None:
        super().__init__(errno.EDQUOT, message)
        self.quota_bytes = quota_bytes
        self.seen_bytes = seen_bytes

    def __str__(self) -> str:
        return str(self.strerror)


@define
class DroppedEntry:
    """An archive entry that was not copied, and why."""

    name: str
    reason: str


@define
class ExportReport:
    """What an export copied: counts, the apparent size, what was left out."""

    dest: Path
    files: int = 0
    directories: int = 0
    #: Names that share a file's data (hard links, and internal symlinks made hard links).
    links: int = 0
    #: Apparent size of the copied files, in bytes (what counts against the quota).
    bytes: int = 0
    #: Host disk actually allocated for them (holes are not allocated).
    disk_bytes: int = 0
    #: Entries left out by ``exclude``/``include``.
    excluded: int = 0
    dropped: list[DroppedEntry] = field(factory=list)

    def summary(self) -> str:
        line = (f"{self.files} files, {self.directories} folders, "
                f"{self.bytes / 2**20:.1f} MiB")
        if self.dropped:
            line += f"; {len(self.dropped)} entries dropped (" + "; ".join(
                f"{d.name}: {d.reason}" for d in self.dropped[:5]) + \
                (", ..." if len(self.dropped) > 5 else "") + ")"
        return line


def _printable(name: str) -> str:
    """``name`` for a report line: escaped like a Python literal when needed."""
    return name if name.isprintable() else ascii(name)[1:-1]


def check_name(rel: str) -> str | None:
    """None when ``rel`` (a relative path from an archive) is acceptable, else why not."""
    if not rel:
        return "empty name"
    if rel.startswith("/"):
        return "absolute name"
    if len(rel.encode("utf-8", "surrogateescape")) > _PATH_MAX:
        return "name too long"
    for ch in rel:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return "control character in name"
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            return "name is not UTF-8"
        if unicodedata.category(ch) in ("Cc", "Cs"):
            return "control character in name"
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            return f"'{part}' component in name" if part else "empty component in name"
        if len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX:
            return "name too long"
    return None


class _Extractor:
    def __init__(self, dest: Path, *, root: str, exclude: Sequence[str],
                 include: Sequence[str] | None, quota_bytes: int | None, max_entries: int,
                 sandbox_root: str | None) -> None:
        self.dest = dest
        self.root = root.strip("/") if root not in (".", "./") else "."
        self.exclude = list(exclude)
        self.include = None if include is None else list(include)
        self.quota = quota_bytes
        self.max_entries = max_entries
        self.sandbox_root = sandbox_root.rstrip("/") if sandbox_root else None
        self.report = ExportReport(dest=dest)
        self.kinds: dict[str, str] = {}  # rel -> "dir" | "file"
        self.symlinks: list[tuple[str, str]] = []
        self.link_names: set[str] = set()
        self.entries = 0
        self.root_kind: str | None = None

    # -- names ------------------------------------------------------------------

    def relative(self, name: str) -> str | None:
        """The member's path relative to the export root ("" for the root itself),
        or None when it lies outside the root."""
        name = name.rstrip("/")
        if self.root == ".":
            if name in (".", ""):
                return ""
            if name.startswith("./"):
                return name[2:]
            return name
        if name == self.root:
            return ""
        if name.startswith(self.root + "/"):
            return name[len(self.root) + 1:]
        return None

    def excluded(self, rel: str) -> bool:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if any(glob_match(prefix, p) for p in self.exclude):
                return True
        return False

    def included(self, rel: str) -> bool:
        return self.include is None or any(glob_match(rel, p) for p in self.include)

    def drop(self, name: str, reason: str) -> None:
        self.report.dropped.append(DroppedEntry(_printable(name), reason))

    def host(self, rel: str) -> Path:
        return self.dest / rel if rel else self.dest

    # -- members ------------------------------------------------------------------

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise WorkspaceExportError(errno.EFBIG, f"the workspace has more than "
                                       f"{self.max_entries} entries; remove some files")
        rel = self.relative(member.name)
        if rel is None:
            self.drop(member.name, "outside the copied folder")
            return
        if rel:
            problem = check_name(rel)
            if problem is not None:
                self.drop(rel, problem)
                return
            if self.root_kind != "dir":
                self.drop(rel, "entry below a root that is not a folder")
                return
            if self.excluded(rel):
                self.report.excluded += 1
                return
            if self.include is not None and (member.isreg() or member.islnk()) \
                    and not self.included(rel):
                self.report.excluded += 1
                return
            if self.include is not None and member.isdir() and not self.included(rel):
                return  # created on demand when a file below it is kept
            parent = posixpath.dirname(rel)
            if self.link_names and any(p in self.link_names for p in _prefixes(parent)):
                self.drop(rel, "inside a symbolic link")
                return
            if member.issym():
                self.symlinks.append((rel, member.linkname))
                self.link_names.add(rel)
                return
            if parent and self.kinds.get(parent) != "dir" and not self._make_parents(parent):
                self.drop(rel, "its folder could not be created")
                return
        elif self.root_kind is not None:
            self.drop(member.name, "duplicate root entry")
            return
        if member.isdir():
            self._dir(rel, member)
        elif member.isreg():
            self._file(tar, rel, member)
        elif member.islnk():
            self._hardlink(rel, member)
        elif member.issym():
            self.symlinks.append((rel, member.linkname))
        else:
            self.drop(rel or member.name, "not a regular file or folder")

    def _make_parents(self, parent: str) -> bool:
        """Create missing folders down to ``parent`` (entries the archive skipped
        or that ``include`` left out); False when a file is in the way."""
        current = ""
        for part in parent.split("/"):
            current = f"{current}/{part}" if current else part
            kind = self.kinds.get(current)
            if kind == "dir":
                continue
            if kind is not None:
                return False
            os.mkdir(self.host(current), 0o755)
            self.kinds[current] = "dir"
            self.report.directories += 1
        return True

    def _dir(self, rel: str, member: tarfile.TarInfo) -> None:
        if not rel:
            self.root_kind = "dir"
            if not self.dest.is_dir():
                os.mkdir(self.dest, 0o755)
            return
        kind = self.kinds.get(rel)
        if kind == "dir":
            return
        if kind is not None:
            self.drop(member.name, "a file of the same name came first")
            return
        os.mkdir(self.host(rel), 0o755)
        self.kinds[rel] = "dir"
        self.report.directories += 1

    def _charge(self, name: str, size: int) -> None:
        total = self.report.bytes + size
        if self.quota is not None and total > self.quota:
            raise WorkspaceQuotaExceeded(
                f"the workspace holds more than its quota of {self.quota / 2**20:g} MiB "
                f"(resources.disk_mb): {total / 2**20:.1f} MiB counted when "
                f"'{_printable(name)}' ({size / 2**20:.1f} MiB) was reached; delete large files "
                "(sparse files count at their full size)",
                quota_bytes=self.quota, seen_bytes=total)
        self.report.bytes = total

    def _file(self, tar: tarfile.TarFile, rel: str, member: tarfile.TarInfo) -> None:
        if rel in self.kinds:
            self.drop(member.name, "duplicate entry")
            return
        if not rel:
            if self.root_kind is not None:
                self.drop(member.name, "duplicate root entry")
                return
            self.root_kind = "file"
        self._charge(member.name, member.size)
        mode = 0o755 if member.mode & 0o111 else 0o644
        path = self.host(rel)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        try:
            # The member's stored data follows its header in the stream: the data
            # regions one after the other for a sparse entry, else the whole file.
            source: IO[bytes] = tar.fileobj  # type: ignore[assignment]
            source.seek(member.offset_data)
            sparse: list[tuple[int, int]] | None = member.sparse  # type: ignore[assignment]
            regions = sparse if sparse is not None else [(0, member.size)]
            for offset, size in regions:
                if offset + size > member.size:
                    raise WorkspaceExportError(errno.EIO, "corrupt sparse entry", str(path))
                _copy_region(source, fd, offset, size, path)
            os.ftruncate(fd, member.size)
            st = os.fstat(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        try:
            os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)
        except (OverflowError, OSError, ValueError):
            pass
        if rel:
            self.kinds[rel] = "file"
        self.report.files += 1
        self.report.disk_bytes += st.st_blocks * 512

    def _hardlink(self, rel: str, member: tarfile.TarInfo) -> None:
        target = self.relative(member.linkname)
        if not rel or target is None or not target or self.kinds.get(target) != "file":
            self.drop(member.name, "hard link to something outside the copy or not a file")
            return
        self._link(rel, target, member.name)

    def _link(self, rel: str, target: str, name: str) -> None:
        if rel in self.kinds:
            self.drop(name, "duplicate entry")
            return
        size = os.stat(self.host(target)).st_size
        self._charge(name, size)
        os.link(self.host(target), self.host(rel), follow_symlinks=False)
        self.kinds[rel] = "file"
        self.report.links += 1

    # -- symbolic links, once every file is in place ------------------------------------

    def resolve_symlinks(self) -> None:
        links = dict(self.symlinks)
        for rel, _target in self.symlinks:
            name = rel or self.root
            if not rel:
                self.drop(name, "the copied path is a symbolic link")
                continue
            if self.excluded(rel) or not self.included(rel):
                self.report.excluded += 1
                continue
            final = self._follow(rel, links)
            if final is None:
                self.drop(name, "symbolic link to something outside the workspace")
            elif self.kinds.get(final) == "file":
                parent = posixpath.dirname(rel)
                if parent and self.kinds.get(parent) != "dir" and (
                        self.kinds.get(parent) is not None or not self._make_parents(parent)):
                    self.drop(name, "its folder was not copied")
                    continue
                self._link(rel, final, name)
            elif self.kinds.get(final) == "dir":
                self.drop(name, "symbolic link to a folder")
            else:
                self.drop(name, "dangling symbolic link")

    def _follow(self, rel: str, links: dict[str, str]) -> str | None:
        """Where a chain of symbolic links starting at ``rel`` ends, relative to the
        root; None when it leaves the workspace or loops."""
        current = rel
        for _ in range(40):
            if current not in links:
                return current
            target = links[current]
            if target.startswith("/"):
                if self.sandbox_root is None:
                    return None
                if target != self.sandbox_root and not target.startswith(self.sandbox_root + "/"):
                    return None
                joined = target[len(self.sandbox_root):].lstrip("/")
            else:
                joined = posixpath.join(posixpath.dirname(current), target)
            normal = posixpath.normpath(joined) if joined else "."
            if normal == "." or normal.startswith("../") or normal == ".." or \
                    normal.startswith("/"):
                return None
            # A folder on the way may itself be a link: resolve component by component.
            parts = normal.split("/")
            resolved = ""
            for i, part in enumerate(parts):
                resolved = f"{resolved}/{part}" if resolved else part
                if i < len(parts) - 1 and resolved in links:
                    return None  # links through linked folders are not followed
            current = normal
        return None


def _prefixes(path: str) -> list[str]:
    """``a``, ``a/b``, ``a/b/c`` for ``a/b/c`` (nothing for "")."""
    parts = path.split("/") if path else []
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _copy_region(source: IO[bytes], fd: int, offset: int, size: int, path: Path) -> None:
    """Copy ``size`` bytes to ``offset`` of ``fd``, seeking over all-zero chunks."""
    position = offset
    left = size
    while left > 0:
        chunk = source.read(min(_CHUNK, left))
        if not chunk:
            raise WorkspaceExportError(errno.EIO, "the workspace archive ended in the middle "
                                       "of a file", str(path))
        if chunk.count(0) != len(chunk):
            view = memoryview(chunk)
            written = 0
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
        position += len(chunk)
        left -= len(chunk)


def extract_archive(stream: IO[bytes], dest: Path, *, root: str = ".",
                    exclude: Sequence[str] = (), include: Sequence[str] | None = None,
                    quota_bytes: int | None = None, max_entries: int = DEFAULT_MAX_ENTRIES,
                    sandbox_root: str | None = None) -> ExportReport:
    """Extract the tar ``stream`` (read once, front to back) into ``dest``, which
    must not exist yet: the archive entry named ``root`` becomes ``dest`` (a
    folder, or a single file), entries below it its contents, anything else is
    dropped.  ``sandbox_root`` is where ``root`` lies inside the sandbox, so
    absolute symbolic links into it can be resolved.

    Raises :class:`WorkspaceQuotaExceeded` past ``quota_bytes``,
    :class:`WorkspaceExportError` for an unreadable or truncated stream or too
    many entries, :class:`FileNotFoundError` when the archive has no ``root``;
    on error nothing is left at ``dest``."""
    dest = Path(dest)
    if dest.exists() or dest.is_symlink():
        raise FileExistsError(errno.EEXIST, "the export destination already exists", str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    extractor = _Extractor(dest, root=root, exclude=exclude, include=include,
                           quota_bytes=quota_bytes, max_entries=max_entries,
                           sandbox_root=sandbox_root)
    try:
        try:
            with tarfile.open(fileobj=stream, mode="r|*") as tar:
                for member in tar:
                    extractor.add(tar, member)
        except tarfile.ReadError as exc:
            if extractor.entries == 0 and "empty" in str(exc):
                raise FileNotFoundError(errno.ENOENT, "nothing to copy (empty archive)",
                                        root) from None
            raise WorkspaceExportError(errno.EIO, f"unreadable workspace archive ({exc})") \
                from None
        except (tarfile.TarError, EOFError) as exc:
            raise WorkspaceExportError(errno.EIO, f"corrupt workspace archive ({exc})") from None
        if extractor.root_kind is None:
            if extractor.symlinks and extractor.symlinks[0][0] == "":
                raise WorkspaceExportError(errno.ELOOP, "the path to copy is a symbolic link",
                                           root)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), root)
        extractor.resolve_symlinks()
    except BaseException:
        _remove(dest)
        raise
    return extractor.report


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        try:
            path.unlink()
        except OSError:
            pass


def apparent_and_disk_size(path: Path) -> tuple[int, int]:
    """``(apparent bytes, allocated bytes)`` of the files under ``path`` (for tests
    and reports; links are not followed)."""
    apparent = disk = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(st.st_mode):
                apparent += st.st_size
                disk += st.st_blocks * 512
    return apparent, disk

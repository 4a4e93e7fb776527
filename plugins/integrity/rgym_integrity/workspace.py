"""Looking at the agent's workspace through the sandbox API, cheaply.

:class:`WorkspaceProbe` runs short, fresh processes in the sandbox as the agent
user (``Sandbox.exec``; never the agent's shell session, whose functions and
aliases the agent controls): one ``find`` lists every file with its size,
modification time, change time (which no user can set back) and inode, so a
step's changes are a comparison of two listings; ``sha256sum`` hashes
protected files; ``head | base64`` reads the first bytes of changed text files.
Names travel NUL-separated and contents base64-encoded, so no file name or
content can forge a record.

:func:`read_archive` reads ``workspace.tar.gz`` (the final workspace, written
by the runner after the episode) once, front to back, hashing the files asked for.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import shlex
import stat
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

#: Folders never listed: tools' caches and environments, not results.
PRUNED_NAMES = (".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages", ".cache",
                ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", "wandb")
LISTING_LIMIT_BYTES = 8 << 20
READ_LIMIT_FILE = 256 << 10
READ_LIMIT_TOTAL = 2 << 20
#: Files read when they change (text and code; files without an extension too).
READ_EXTENSIONS = (".txt", ".md", ".json", ".jsonl", ".csv", ".tsv", ".yaml", ".yml", ".log", ".tex",
                   ".html", ".rst", ".out", ".ini", ".toml", ".cfg", ".xml", ".py", ".sh", ".bash", ".r",
                   ".R", ".jl", ".js", ".ts", ".ipynb", ".c", ".cc", ".cpp", ".h", ".hpp", ".rs", ".go",
                   ".java", ".lua", ".rb", ".pl", ".m")
_HASH_LINE = re.compile(r"(?:^|\x00)\\?([0-9a-f]{64}) [ *]([^\x00]*)(?=\x00)")


@define(frozen=True)
class Entry:
    """One file of a listing: ``kind`` ``f`` (file) or ``l`` (symbolic link)."""

    kind: str
    size: int
    mtime: str
    ctime: str
    inode: int
    mode: str = ""

    @property
    def signature(self) -> tuple[str, int, str, str, int, str]:
        return (self.kind, self.size, self.mtime, self.ctime, self.inode, self.mode)


Listing = dict[str, Entry]


@define
class Change:
    """A file that appeared, changed or disappeared between two listings."""

    path: str
    change: str  # created | modified | deleted
    before: Entry | None = None
    after: Entry | None = None


def diff_listings(before: Listing, after: Listing) -> list[Change]:
    """What changed from ``before`` to ``after``, sorted by path."""
    out: list[Change] = []
    for path, entry in after.items():
        old = before.get(path)
        if old is None:
            out.append(Change(path, "created", None, entry))
        elif old.signature != entry.signature:
            out.append(Change(path, "modified", old, entry))
    for path, entry in before.items():
        if path not in after:
            out.append(Change(path, "deleted", entry, None))
    return sorted(out, key=lambda c: c.path)


@define
class WorkspaceProbe:
    """Reads the workspace of a live sandbox (see the module docstring).

    ``problem`` is set (and methods return nothing) when the sandbox cannot run
    the tools needed (``find -printf``, ``sha256sum``, ``base64``)."""

    sandbox: Any
    exclude: Sequence[str] = ()
    timeout: float = 120.0
    problem: str | None = None
    truncated: bool = False
    execs: int = 0
    _cache: dict[str, tuple[tuple[Any, ...], bytes]] = field(factory=dict)

    def _exec(self, argv: list[str], *, output_limit: int = LISTING_LIMIT_BYTES) -> Any:
        self.execs += 1
        return self.sandbox.exec(argv, timeout=self.timeout, output_limit=output_limit)

    def listing(self) -> Listing | None:
        """Every file of the workspace (datasets' mounts and caches left out)."""
        if self.problem is not None:
            return None
        prune: list[str] = []
        for mount in self.exclude:
            prune += ["-path", f"./{mount.strip('/')}", "-o"]
        for name in PRUNED_NAMES:
            prune += ["-name", name, "-o"]
        argv = ["find", ".", "(", *prune[:-1], ")", "-prune", "-o", "(", "-type", "f", "-o", "-type", "l",
                ")", "-printf", "%y\\t%s\\t%T@\\t%C@\\t%i\\t%m\\t%P\\0"]
        try:
            result = self._exec(argv)
        except Exception as exc:  # noqa: BLE001 - a sandbox that cannot list: say so, go on
            self.problem = f"the workspace could not be listed ({type(exc).__name__}: {exc})"
            return None
        if result.truncated:
            self.truncated = True
        out = _parse_listing(result.output, truncated=result.truncated)
        if not out and result.exit_code != 0:
            self.problem = (f"the workspace could not be listed (find exited {result.exit_code}: "
                            f"{result.output.strip()[:200]})")
            return None
        return out

    def _prune(self) -> list[str]:
        prune: list[str] = []
        for mount in self.exclude:
            prune += ["-path", f"./{mount.strip('/')}", "-o"]
        for name in PRUNED_NAMES:
            prune += ["-name", name, "-o"]
        return ["(", *prune[:-1], ")", "-prune", "-o"]

    def snapshot(self, *, since: float | None, hash_paths: Sequence[str] = (),
                 per_file: int = READ_LIMIT_FILE, max_files: int = 64) -> Snapshot | None:
        """One sandbox call: the listing, the first bytes of the text and code files
        changed since ``since`` (a time of this machine's clock; ``None``: every such
        file), and the SHA-256 of ``hash_paths``."""
        if self.problem is not None:
            return None
        nonce = "n" + secrets.token_hex(8)
        q = shlex.quote
        prune = " ".join(q(w) for w in self._prune())
        names = " -o ".join(f"-name {q('*' + ext)}" for ext in sorted(READ_EXTENSIONS))
        newer = f"-newerct @{since - 1.0:.3f}" if since is not None else ""
        kib = max(1, per_file // 1024)
        script = (
            "since=$1; shift\n"
            f"find . {prune} \\( -type f -o -type l \\) -printf '%y\\t%s\\t%T@\\t%C@\\t%i\\t%m\\t%P\\0'\n"
            f"printf '\\000%s\\000' {nonce}-read\n"
            f"find . {prune} -type f -size -{kib + 1}k {newer} \\( {names} -o ! -name '*.*' \\) -print0 "
            f"| head -z -n {int(max_files)} | xargs -0 -r sh -c "
            + q('for f do printf "%s\\0" "${f#./}"; head -c ' + str(int(per_file))
                + ' -- "$f" 2>/dev/null | base64 -w0; printf "\\0"; done') + " sh\n"
            f"printf '\\000%s\\000' {nonce}-hash\n"
            "[ $# -gt 0 ] && sha256sum -z -- \"$@\" 2>/dev/null\n"
            "exit 0\n")
        try:
            result = self._exec(["sh", "-c", script, "sh", "-", *hash_paths],
                                output_limit=LISTING_LIMIT_BYTES + (max_files * per_file * 4) // 3 + (1 << 20))
        except Exception as exc:  # noqa: BLE001
            self.problem = f"the workspace could not be listed ({type(exc).__name__}: {exc})"
            return None
        output = result.output
        read_marker, hash_marker = f"\x00{nonce}-read\x00", f"\x00{nonce}-hash\x00"
        if read_marker not in output:
            if result.truncated:
                self.truncated = True
            listing_text, read_text, hash_text = output, "", ""
        else:
            listing_text, rest = output.split(read_marker, 1)
            read_text, _, hash_text = rest.partition(hash_marker)
        listing = _parse_listing(listing_text, truncated=read_marker not in output)
        if not listing and result.exit_code != 0:
            self.problem = (f"the workspace could not be listed (exit {result.exit_code}: "
                            f"{output.strip()[:200]})")
            return None
        texts: dict[str, bytes] = {}
        parts = read_text.split("\x00")
        for name, encoded in zip(parts[0::2], parts[1::2], strict=False):
            try:
                texts[name] = base64.b64decode(encoded, validate=False)
            except (ValueError, TypeError):
                continue
        hashes: dict[str, str | None] = {p: None for p in hash_paths}
        for match in _HASH_LINE.finditer("\x00" + hash_text):
            if match.group(2) in hashes:
                hashes[match.group(2)] = match.group(1)
        return Snapshot(listing=listing, texts=texts, hashes=hashes)

    def hashes(self, paths: Iterable[str]) -> dict[str, str | None]:
        """SHA-256 of each path (``None``: missing or unreadable)."""
        try:
            return self.hashes_or_raise(paths)
        except Exception:  # noqa: BLE001
            return {p: None for p in paths}

    def hashes_or_raise(self, paths: Iterable[str]) -> dict[str, str | None]:
        """:meth:`hashes`, raising when the sandbox cannot run ``sha256sum`` at all."""
        paths = list(paths)
        out: dict[str, str | None] = {p: None for p in paths}
        if self.problem is not None or not paths:
            return out
        for chunk in _chunks(paths, 200):
            result = self._exec(["sha256sum", "-z", "--", *chunk], output_limit=1 << 20)
            if result.exit_code in (126, 127):
                raise RuntimeError(f"sha256sum could not run (exit {result.exit_code})")
            for match in _HASH_LINE.finditer(result.output):
                if match.group(2) in out:
                    out[match.group(2)] = match.group(1)
        return out

    def read(self, paths: Iterable[str], *, per_file: int = READ_LIMIT_FILE,
             total: int = READ_LIMIT_TOTAL, signatures: Mapping[str, Entry] | None = None) -> dict[str, bytes]:
        """The first ``per_file`` bytes of each path (at most ``total`` in all); files
        whose listing entry did not change since the last read come from a cache."""
        out: dict[str, bytes] = {}
        wanted: list[str] = []
        budget = total
        for path in paths:
            entry = signatures.get(path) if signatures else None
            cached = self._cache.get(path)
            if entry is not None and cached is not None and cached[0] == entry.signature:
                out[path] = cached[1]
                continue
            size = entry.size if entry is not None else per_file
            if budget <= 0:
                break
            budget -= min(size, per_file)
            wanted.append(path)
        if self.problem is not None or not wanted:
            return out
        script = (f"for f do printf '%s\\0' \"$f\"; head -c {int(per_file)} -- \"$f\" 2>/dev/null "
                  "| base64 -w0; printf '\\0'; done")
        for chunk in _chunks(wanted, 100):
            try:
                result = self._exec(["sh", "-c", script, "sh", *chunk], output_limit=(total * 4) // 3 + (1 << 16))
            except Exception:  # noqa: BLE001
                continue
            parts = result.output.split("\x00")
            for name, encoded in zip(parts[0::2], parts[1::2], strict=False):
                try:
                    data = base64.b64decode(encoded, validate=False)
                except (ValueError, TypeError):
                    continue
                out[name] = data
                entry = signatures.get(name) if signatures else None
                if entry is not None:
                    self._cache[name] = (entry.signature, data)
        return out


@define
class HostProbe:
    """The same answers as :class:`WorkspaceProbe`, read straight from the workspace's
    host folder when the backend has one (the local sandbox's ``host_workspace``):
    no process is started.  Every path is opened relative to its parent folder's
    descriptor with ``O_NOFOLLOW`` (no link is ever followed, whatever the agent
    swaps in meanwhile) and only regular files are read."""

    root: str
    exclude: Sequence[str] = ()
    problem: str | None = None
    truncated: bool = False
    execs: int = 0
    max_entries: int = 200_000

    def _walk(self, since: float | None, per_file: int, max_files: int) -> tuple[Listing, dict[str, bytes]]:
        listing: Listing = {}
        texts: dict[str, bytes] = {}
        threshold = None if since is None else int((since - 1.0) * 1e9)
        excluded = {m.strip("/") for m in self.exclude}
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        root_fd = os.open(self.root, flags)
        stack: list[tuple[int, str]] = [(root_fd, "")]
        try:
            while stack:
                fd, prefix = stack.pop()
                try:
                    with os.scandir(fd) as entries:
                        for entry in entries:
                            rel = prefix + entry.name
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            if stat.S_ISDIR(st.st_mode):
                                if entry.name in PRUNED_NAMES or rel in excluded:
                                    continue
                                try:
                                    sub = os.open(entry.name, flags, dir_fd=fd)
                                except OSError:
                                    continue
                                stack.append((sub, rel + "/"))
                                continue
                            kind = "f" if stat.S_ISREG(st.st_mode) else ("l" if stat.S_ISLNK(st.st_mode) else "")
                            if not kind:
                                continue
                            if len(listing) >= self.max_entries:
                                self.truncated = True
                                continue
                            listing[rel] = Entry(kind=kind, size=st.st_size, mtime=str(st.st_mtime_ns),
                                                 ctime=str(st.st_ctime_ns), inode=st.st_ino,
                                                 mode=format(stat.S_IMODE(st.st_mode), "o"))
                            if kind == "f" and st.st_size <= per_file and len(texts) < max_files \
                                    and (threshold is None or st.st_ctime_ns >= threshold) \
                                    and _read_extension(entry.name):
                                data = _read_at(fd, entry.name, per_file)
                                if data is not None:
                                    texts[rel] = data
                finally:
                    os.close(fd)
        finally:
            for fd, _ in stack:
                os.close(fd)
        return listing, texts

    def snapshot(self, *, since: float | None, hash_paths: Sequence[str] = (),
                 per_file: int = READ_LIMIT_FILE, max_files: int = 64) -> Snapshot | None:
        if self.problem is not None:
            return None
        try:
            listing, texts = self._walk(since, per_file, max_files)
        except OSError as exc:
            self.problem = f"the workspace could not be listed ({exc.strerror or exc})"
            return None
        return Snapshot(listing=listing, texts=texts, hashes=self.hashes(hash_paths))

    def listing(self) -> Listing | None:
        snap = self.snapshot(since=time.time() + 10, max_files=0)
        return snap.listing if snap is not None else None

    def hashes(self, paths: Iterable[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for path in paths:
            digest = hashlib.sha256()
            ok = _stream_at(self.root, path, digest.update)
            out[path] = digest.hexdigest() if ok else None
        return out

    def read(self, paths: Iterable[str], *, per_file: int = READ_LIMIT_FILE,
             total: int = READ_LIMIT_TOTAL, signatures: Mapping[str, Entry] | None = None) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for path in paths:
            chunks: list[bytes] = []
            size = [0]

            def take(block: bytes, chunks: list[bytes] = chunks, size: list[int] = size) -> None:
                if size[0] < per_file:
                    chunks.append(block[: per_file - size[0]])
                    size[0] += len(chunks[-1])

            if _stream_at(self.root, path, take, limit=per_file):
                out[path] = b"".join(chunks)
            total -= size[0]
            if total <= 0:
                break
        return out


def _read_extension(name: str) -> bool:
    if "." not in name.strip("."):
        return True
    return ("." + name.rsplit(".", 1)[1]) in READ_EXTENSIONS or ("." + name.rsplit(".", 1)[1].lower()) in READ_EXTENSIONS


def _read_at(dir_fd: int, name: str, limit: int) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stream_at(root: str, path: str, sink: Callable[[bytes], None], limit: int | None = None) -> bool:
    """Feed the regular file ``root/path`` to ``sink``, opening each component without
    following links; False when it is missing, not a regular file or unreadable."""
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return False
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fds: list[int] = []
    try:
        fd = os.open(root, flags | os.O_DIRECTORY)
        fds.append(fd)
        for part in parts[:-1]:
            fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            fds.append(fd)
        fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        fds.append(fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        seen = 0
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                return True
            sink(block)
            seen += len(block)
            if limit is not None and seen >= limit:
                return True
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)


def make_probe(sandbox: Any, exclude: Sequence[str] = ()) -> WorkspaceProbe | HostProbe:
    """The cheapest way to look at ``sandbox``'s workspace: its host folder when the
    backend names one (``host_workspace``) and ``RGYM_INTEGRITY_PROBE`` is not
    ``sandbox``, else fresh processes through the sandbox API."""
    host = getattr(sandbox, "host_workspace", None)
    if os.environ.get("RGYM_INTEGRITY_PROBE", "").lower() != "sandbox" and isinstance(host, str | Path) \
            and host and os.path.isdir(host):
        return HostProbe(str(host), exclude=exclude)
    return WorkspaceProbe(sandbox, exclude=exclude)


@define
class Snapshot:
    """What one :meth:`WorkspaceProbe.snapshot` call saw."""

    listing: Listing
    texts: dict[str, bytes] = field(factory=dict)
    hashes: dict[str, str | None] = field(factory=dict)


def _parse_listing(text: str, *, truncated: bool) -> Listing:
    out: Listing = {}
    records = text.split("\x00")
    if truncated:
        records = records[:-1]
    for record in records:
        parts = record.split("\t", 6)
        if len(parts) != 7:
            continue
        kind, size, mtime, ctime, inode, mode, path = parts
        try:
            out[path] = Entry(kind=kind, size=int(size), mtime=mtime, ctime=ctime, inode=int(inode), mode=mode)
        except ValueError:
            continue
    return out


def _chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i:i + size])


@define
class ArchiveFile:
    """A file of the final workspace: its size, SHA-256 and, for small text files,
    its first bytes."""

    path: str
    size: int
    sha256: str | None = None
    head: bytes | None = None


def read_archive(archive: Path, *, want_hash: Callable[[str, int], bool],
                 want_text: Callable[[str, int], bool], per_file: int = READ_LIMIT_FILE,
                 max_bytes: int = 4 << 30) -> tuple[dict[str, ArchiveFile], str | None]:
    """Read ``workspace.tar.gz`` once: every regular file with its size; SHA-256 for
    the files ``want_hash(path, size)`` picks and the first bytes of those
    ``want_text`` picks.  Returns the files and a problem sentence (or ``None``)."""
    files: dict[str, ArchiveFile] = {}
    seen = 0
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                name = _archive_name(member.name)
                if name is None:
                    continue
                if member.islnk():  # a second name of a file already read
                    target = _archive_name(member.linkname)
                    if target in files:
                        first = files[target]
                        files[name] = ArchiveFile(path=name, size=first.size, sha256=first.sha256,
                                                  head=first.head)
                    continue
                if not member.isreg():
                    continue
                item = ArchiveFile(path=name, size=member.size)
                files[name] = item
                hash_it = want_hash(name, member.size)
                text_it = want_text(name, member.size)
                if not (hash_it or text_it):
                    continue
                seen += member.size
                if seen > max_bytes:
                    return files, f"the final workspace is larger than {max_bytes >> 20} MiB: hashed in part"
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                digest = hashlib.sha256()
                head = b""
                while True:
                    block = fh.read(1 << 20)
                    if not block:
                        break
                    if text_it and len(head) < per_file:
                        head += block[:per_file - len(head)]
                    if not hash_it and len(head) >= per_file:
                        break
                    digest.update(block)
                if hash_it:
                    item.sha256 = digest.hexdigest()
                if text_it:
                    item.head = head
    except FileNotFoundError:
        return files, "the run has no workspace.tar.gz (archiving was off or failed)"
    except (tarfile.TarError, OSError, EOFError) as exc:
        return files, f"workspace.tar.gz could not be read ({type(exc).__name__}: {exc})"
    return files, None


def _archive_name(name: str) -> str | None:
    """A member's path inside the workspace (the archive's root is ``workspace/``)."""
    for prefix in ("./", "workspace/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if not name or name in (".", "workspace") or name.startswith(("/", "../")) or "/../" in name:
        return None
    return name


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["PRUNED_NAMES", "ArchiveFile", "Change", "Entry", "HostProbe", "Listing", "Snapshot",
           "WorkspaceProbe", "diff_listings", "make_probe", "read_archive", "sha256_bytes"]

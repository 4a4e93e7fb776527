"""Git object hashes computed from files, without git.

A ResearchGym task directory is pinned by the git tree hash of
``tasks/test/<task>`` at one commit.  :func:`tree_of_folder` and
:func:`tree_of_entries` compute that hash from a folder on disk or from the
members of an archive, exactly as ``git rev-parse <commit>:<path>`` would:

* a file is a blob ``blob <size>\\0<bytes>``, with mode ``100755`` when its
  owner-execute bit is set and ``100644`` otherwise; a symlink is a blob of its
  target with mode ``120000``;
* a folder is a tree of ``<mode> <name>\\0<20-byte id>`` entries sorted as git
  sorts them (a folder's name compares as if it ended with ``/``); empty
  folders do not exist in git.

Byproducts of running Python (``__pycache__`` folders, ``*.pyc``) are never in
git and are left out, so a task directory whose code was merely imported still
verifies.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from attrs import define

FILE_MODE = "100644"
EXEC_MODE = "100755"
LINK_MODE = "120000"
TREE_MODE = "40000"


def is_byproduct(relpath: str) -> bool:
    """True for files that running the code creates and git never holds."""
    parts = PurePosixPath(relpath).parts
    return "__pycache__" in parts or relpath.endswith((".pyc", ".pyo"))


def blob_id(data: bytes) -> str:
    """The git blob id (SHA-1 hex) of ``data``."""
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def file_blob_id(path: Path, size: int, chunk: int = 1 << 20) -> str:
    """The git blob id of the file at ``path`` (of ``size`` bytes), read in chunks."""
    digest = hashlib.sha1(b"blob %d\0" % size)
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@define(frozen=True)
class Entry:
    """One file of a tree: POSIX path relative to the tree's root, git mode, blob id."""

    path: str
    mode: str
    blob: str


def _tree_id(entries: list[tuple[bytes, str, str]]) -> str:
    """Hash one tree level from ``(name, mode, id)`` triples."""
    def key(item: tuple[bytes, str, str]) -> bytes:
        name, mode, _ = item
        return name + b"/" if mode == TREE_MODE else name

    body = b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(ident)
                    for name, mode, ident in sorted(entries, key=key))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def tree_of_entries(entries: Iterable[Entry]) -> str:
    """The git tree id of a set of files given by relative POSIX paths.

    Raises :class:`ValueError` for an empty set (git has no empty tree at a path).
    """
    root: dict[str, object] = {}
    count = 0
    for entry in entries:
        parts = PurePosixPath(entry.path).parts
        if not parts or ".." in parts or entry.path.startswith("/"):
            raise ValueError(f"{entry.path!r}: not a relative path inside the tree")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{entry.path!r}: '{part}' is both a file and a folder")
            node = child
        node[parts[-1]] = entry
        count += 1
    if not count:
        raise ValueError("no files: git has no tree for an empty folder")

    def walk(node: dict[str, object]) -> str:
        level: list[tuple[bytes, str, str]] = []
        for name, child in node.items():
            if isinstance(child, dict):
                level.append((name.encode(), TREE_MODE, walk(child)))
            else:
                assert isinstance(child, Entry)
                level.append((name.encode(), child.mode, child.blob))
        return _tree_id(level)

    return walk(root)


def entries_of_folder(folder: Path) -> list[Entry]:
    """Every file below ``folder`` as git would record it (byproducts left out).

    Symlinks are recorded as links (never followed); other special files are
    refused with :class:`ValueError` naming them.
    """
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        base = Path(dirpath)
        for name in [*filenames, *[d for d in dirnames if os.path.islink(base / d)]]:
            path = base / name
            rel = path.relative_to(folder).as_posix()
            if is_byproduct(rel):
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out.append(Entry(rel, LINK_MODE, blob_id(os.fsencode(os.readlink(path)))))
            elif stat.S_ISREG(st.st_mode):
                mode = EXEC_MODE if st.st_mode & stat.S_IXUSR else FILE_MODE
                out.append(Entry(rel, mode, file_blob_id(path, st.st_size)))
            else:
                raise ValueError(f"{path}: not a regular file, folder or symlink")
    return sorted(out, key=lambda e: e.path)


def tree_of_folder(folder: Path) -> str:
    """The git tree id of ``folder`` as it is on disk."""
    return tree_of_entries(entries_of_folder(folder))


def diff_entries(expected: Iterable[Entry], actual: Iterable[Entry]) -> dict[str, list[str]]:
    """Which paths were ``changed`` (content or mode), ``added`` and ``missing``."""
    want = {e.path: e for e in expected}
    have = {e.path: e for e in actual}
    return {
        "changed": sorted(p for p in want.keys() & have.keys() if want[p] != have[p]),
        "added": sorted(have.keys() - want.keys()),
        "missing": sorted(want.keys() - have.keys()),
    }

"""Finding a ResearchGym task directory in the user's data folder, verifying it
against the pinned git tree, and copying it out.

The data folder (``--data-dir`` / ``RGYM_DATA_DIR``) may hold, in this order of
preference:

1. a checkout: ``DATA/ResearchGym/tasks/test/<task>``, ``DATA/researchgym/...``,
   ``DATA/tasks/test/<task>`` (``DATA`` is the checkout) or ``DATA/<task>`` (the
   task directory itself);
2. an archive of the repository (``git archive``, a GitHub tarball or zip is not
   needed: ``.tar``, ``.tar.gz``, ``.tgz``) anywhere directly in ``DATA``,
   ``DATA/researchgym`` or ``DATA/ResearchGym``, holding ``*/tasks/test/<task>/``
   or ``tasks/test/<task>/``.

Whatever is found must hash to the pinned tree (:mod:`rgym_researchgym.pins`);
otherwise :class:`TaskSourceError` names the task, both tree hashes and the
files that differ.  Archives are read without trusting member names: absolute
paths, ``..``, links and special files are refused.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from attrs import define

from rgym_researchgym.pins import PINNED_COMMIT, TASKS_PATH, TREE_HASHES, known_task, pinned_entries
from rgym_researchgym.treehash import (
    EXEC_MODE,
    FILE_MODE,
    Entry,
    blob_id,
    diff_entries,
    entries_of_folder,
    is_byproduct,
    tree_of_entries,
)

try:  # rgym_core's error type, so the runner reports it as a dataset problem
    from rgym_core import DatasetError as _Base
except ImportError:  # pragma: no cover - the library is usable without the core
    _Base = RuntimeError  # type: ignore[misc, assignment]

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
_LIST_LIMIT = 8


class TaskSourceError(_Base):
    """No pinned copy of a ResearchGym task was found, or it differs from the pin."""


@define(frozen=True)
class TaskSource:
    """Where a task directory was found: a folder, or a member prefix of an archive."""

    task: str
    kind: str  # "folder" or "archive"
    path: Path
    prefix: str = ""  # inside an archive: "ResearchGym/tasks/test/<task>/"

    def describe(self) -> str:
        if self.kind == "folder":
            return str(self.path)
        return f"{self.path} (member {self.prefix.rstrip('/')})"


def _candidate_folders(data_dir: Path, task: str) -> Iterator[Path]:
    for root in (data_dir / "ResearchGym", data_dir / "researchgym", data_dir):
        yield root / TASKS_PATH / task
    yield data_dir / task


def _candidate_archives(data_dir: Path) -> Iterator[Path]:
    for folder in (data_dir, data_dir / "researchgym", data_dir / "ResearchGym"):
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES):
                    yield path


def _archive_prefix(archive: Path, task: str) -> str | None:
    marker = f"{TASKS_PATH}/{task}/"
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                name = member.name.lstrip("./")
                if name.startswith(marker):
                    return marker
                at = name.find("/" + marker)
                if at >= 0 and "/" not in name[:at]:
                    return name[: at + 1] + marker
    except (tarfile.TarError, OSError):
        return None
    return None


def find_task(data_dir: Path | None, task: str) -> TaskSource:
    """Where ``task``'s directory is in ``data_dir`` (see the module docstring)."""
    known_task(task)
    if data_dir is None:
        raise TaskSourceError(
            f"researchgym/{task}: rgym needs ResearchGym's task directories, which it does not "
            f"ship (the repository has no licence): clone {REPO_HINT} (commit {PINNED_COMMIT[:8]}) "
            f"or put its archive in a folder, and pass that folder with --data-dir (or set "
            f"RGYM_DATA_DIR)")
    for folder in _candidate_folders(data_dir, task):
        if (folder / "task_description.md").is_file() or (folder / "grading").is_dir():
            return TaskSource(task, "folder", folder)
    for archive in _candidate_archives(data_dir):
        prefix = _archive_prefix(archive, task)
        if prefix is not None:
            return TaskSource(task, "archive", archive, prefix)
    raise TaskSourceError(
        f"researchgym/{task}: no ResearchGym checkout or archive holding {TASKS_PATH}/{task} in "
        f"{data_dir} (looked for {data_dir}/ResearchGym/{TASKS_PATH}/{task}, "
        f"{data_dir}/{TASKS_PATH}/{task}, {data_dir}/{task} and *.tar.gz / *.tgz / *.tar files); "
        f"clone {REPO_HINT} at commit {PINNED_COMMIT[:8]} there or put its archive there")


REPO_HINT = "the ResearchGym repository (github.com/Anikethh/ResearchGym)"


def _safe_member_path(member: tarfile.TarInfo, prefix: str, archive: Path) -> str | None:
    name = member.name.lstrip("./") if member.name.startswith("./") else member.name
    if not name.startswith(prefix):
        return None
    rel = name[len(prefix):].rstrip("/")
    if not rel:
        return None
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or ".." in parts or any(p in ("", ".") for p in parts):
        raise TaskSourceError(f"{archive}: unsafe member name {member.name!r}; refusing the archive")
    return rel


def _archive_files(source: TaskSource) -> Iterator[tuple[str, tarfile.TarInfo, bytes]]:
    with tarfile.open(source.path) as tar:
        for member in tar:
            rel = _safe_member_path(member, source.prefix, source.path)
            if rel is None or member.isdir() or is_byproduct(rel):
                continue
            if not member.isfile():
                raise TaskSourceError(
                    f"{source.path}: member {member.name!r} is a link or special file; ResearchGym's "
                    f"task directories hold only regular files, so the archive is refused")
            fh = tar.extractfile(member)
            assert fh is not None
            yield rel, member, fh.read()


def source_entries(source: TaskSource) -> list[Entry]:
    """The files of a found task directory, as git would record them."""
    if source.kind == "folder":
        try:
            return entries_of_folder(source.path)
        except ValueError as exc:
            raise TaskSourceError(f"researchgym/{source.task}: {exc}") from None
    out = [Entry(rel, EXEC_MODE if member.mode & stat.S_IXUSR else FILE_MODE, blob_id(data))
           for rel, member, data in _archive_files(source)]
    return sorted(out, key=lambda e: e.path)


def _listing(paths: list[str]) -> str:
    shown = ", ".join(paths[:_LIST_LIMIT])
    return shown + (f" and {len(paths) - _LIST_LIMIT} more" if len(paths) > _LIST_LIMIT else "")


def verify(source: TaskSource) -> str:
    """Check ``source`` against the pinned tree; return the tree hash.

    Raises :class:`TaskSourceError` naming the task, the expected and the actual
    tree hash, and the changed, added and missing files.
    """
    expected = TREE_HASHES[source.task]
    entries = source_entries(source)
    actual = tree_of_entries(entries) if entries else "(empty)"
    if actual == expected:
        return actual
    diff = diff_entries(pinned_entries(source.task), entries)
    what = "; ".join(f"{kind}: {_listing(paths)}" for kind, paths in diff.items() if paths)
    raise TaskSourceError(
        f"researchgym/{source.task}: the task directory {source.describe()} has git tree {actual}, "
        f"but rgym pins tree {expected} (ResearchGym commit {PINNED_COMMIT[:8]}, "
        f"{TASKS_PATH}/{source.task}); {what or 'file modes differ'}. Restore it (git checkout "
        f"{PINNED_COMMIT[:8]} -- {TASKS_PATH}/{source.task}, and move your own files elsewhere) or "
        f"point --data-dir at an unmodified copy")


def copy_out(source: TaskSource, dest: Path) -> None:
    """Copy the task directory's files (byproducts left out) into the new folder ``dest``.

    Executable bits are kept; nothing else of the source's metadata is.
    """
    dest.mkdir(parents=True)
    if source.kind == "folder":
        for entry in source_entries(source):
            target = dest / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            src = source.path / entry.path
            if src.is_symlink():
                raise TaskSourceError(f"{src}: a symlink; ResearchGym task directories hold none")
            shutil.copyfile(src, target)
            target.chmod(0o755 if entry.mode == EXEC_MODE else 0o644)
        return
    for rel, member, data in _archive_files(source):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if member.mode & stat.S_IXUSR else 0o644)


def load_verified(data_dir: Path | None, task: str, dest: Path) -> TaskSource:
    """Find ``task`` in ``data_dir``, verify it against the pin and copy it to ``dest``.

    The copy is hashed again after copying, so a file changed between the check
    and the copy is caught too.
    """
    source = find_task(data_dir, task)
    verify(source)
    copy_out(source, dest)
    verify(TaskSource(task, "folder", dest))
    return source

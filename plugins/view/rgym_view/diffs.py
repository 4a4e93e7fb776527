"""Workspace diffs for the viewer: the final workspace against the task's starter
files, and each validate snapshot against the one before it.

Everything compared here was written by the agent, so it is read as hostile: an
archive is read member by member without extracting it, links and special files
are named and never followed, names are kept as text (the page escapes them), and
every size is capped: a file larger than :data:`MAX_TEXT_BYTES` or holding a NUL
byte (or not UTF-8) is compared by its digest and named only, each file's diff is
cut at :data:`MAX_DIFF_CHARS` and a whole comparison at :data:`MAX_TOTAL_CHARS`.

A comparison is a mapping::

    {"against": "starter files of mlgym/prisoners-dilemma", "files": [
        {"path": "strategy.py", "change": "changed", "diff": "--- a/...", "size": 117},
        {"path": "model.bin", "change": "added", "binary": true, "size": 4096},
        {"path": "evil", "change": "added", "link": true}],
     "same": 3, "note": "..."}
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import stat
import tarfile
from pathlib import Path
from typing import Any

#: Files larger than this are compared by digest only (no diff).
MAX_TEXT_BYTES = 256 * 1024
#: Files larger than this are compared by size only (not even read).
MAX_HASH_BYTES = 64 * 1024 * 1024
#: One file's diff is cut here; a whole comparison's diffs stop here.
MAX_DIFF_CHARS = 60_000
MAX_TOTAL_CHARS = 600_000
#: At most this many changed files are listed (the rest are counted).
MAX_FILES = 500

_PREFIX = "workspace/"


class _Entry:
    __slots__ = ("kind", "size", "digest", "text")

    def __init__(self, kind: str, size: int = 0, digest: str = "", text: str | None = None) -> None:
        self.kind, self.size, self.digest, self.text = kind, size, digest, text


def _content(data: bytes) -> tuple[str, str | None]:
    """``(digest, text or None)`` of a file's bytes (``None``: binary or too large)."""
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_TEXT_BYTES or b"\0" in data:
        return digest, None
    try:
        return digest, data.decode("utf-8")
    except UnicodeDecodeError:
        return digest, None


def read_archive(path: Path) -> dict[str, _Entry]:
    """The entries of a workspace archive (``workspace/`` stripped), by relative path.
    Nothing is extracted; a link is recorded as a link and never followed."""
    out: dict[str, _Entry] = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            name = member.name
            if name.startswith("./"):
                name = name[2:]
            if name == "workspace" or name == "workspace/":
                continue
            name = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
            if not name:
                continue
            if member.isdir():
                continue
            if member.issym() or member.islnk():
                out[name] = _Entry("link", digest=f"link:{member.linkname}")
            elif not member.isfile():
                out[name] = _Entry("special")
            elif member.size > MAX_HASH_BYTES:
                out[name] = _Entry("file", member.size, f"size:{member.size}")
            else:
                fh = tar.extractfile(member)
                data = fh.read() if fh is not None else b""
                digest, text = _content(data)
                out[name] = _Entry("file", member.size, digest, text)
    return out


def read_folder(folder: Path, into: dict[str, _Entry] | None = None) -> dict[str, _Entry]:
    """The entries of a host folder (a starter), links named and not followed."""
    out = into if into is not None else {}
    for base, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(base) / name
            rel = path.relative_to(folder).as_posix()
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rel] = _Entry("link", digest=f"link:{os.readlink(path)}")
            elif not stat.S_ISREG(st.st_mode):
                out[rel] = _Entry("special")
            elif st.st_size > MAX_HASH_BYTES:
                out[rel] = _Entry("file", st.st_size, f"size:{st.st_size}")
            else:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as fh:
                    digest, text = _content(fh.read())
                out[rel] = _Entry("file", st.st_size, digest, text)
    return out


def unified(before: str, after: str, path: str, *, limit: int = MAX_DIFF_CHARS) -> str:
    """A unified diff of two texts, cut at ``limit`` characters with a note."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}", n=3)
    out: list[str] = []
    size = 0
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        size += len(line)
        if size > limit:
            out.append(f"[... rgym view cut this diff at {limit:,} characters ...]\n")
            break
        out.append(line)
    return "".join(out)


def compare(before: dict[str, _Entry], after: dict[str, _Entry], against: str) -> dict[str, Any]:
    """The comparison of two trees (see the module docstring)."""
    files: list[dict[str, Any]] = []
    same = 0
    total = 0
    more = 0
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and old.kind == new.kind and old.digest == new.digest:
            same += 1
            continue
        if len(files) >= MAX_FILES:
            more += 1
            continue
        change = "added" if old is None else "removed" if new is None else "changed"
        item: dict[str, Any] = {"path": path, "change": change}
        shown = new if new is not None else old
        assert shown is not None
        if shown.kind == "link" or (old is not None and old.kind == "link"):
            item["link"] = True
        elif shown.kind == "special":
            item["special"] = True
        else:
            item["size"] = shown.size
            texts = [e.text if e is not None else "" for e in (old, new)]
            if any(t is None for t in texts) or any(e is not None and e.kind != "file" for e in (old, new)):
                item["binary"] = True
            elif total < MAX_TOTAL_CHARS:
                diff = unified(texts[0] or "", texts[1] or "", path,
                               limit=min(MAX_DIFF_CHARS, MAX_TOTAL_CHARS - total))
                total += len(diff)
                item["diff"] = diff
            else:
                item["note"] = "diff left out: the page holds enough diff text for this run already"
        files.append(item)
    out: dict[str, Any] = {"against": against, "files": files, "same": same}
    if more:
        out["more"] = more
    return out


@functools.lru_cache(maxsize=64)
def _starter(task_id: str, profile: str | None) -> tuple[dict[str, _Entry] | None, str]:
    """``(entries, note)`` of the installed task's starter files (``None``, with the
    reason, when the task is not installed here)."""
    from rgym_core import load_registry

    try:
        task = load_registry(lazy=True).task(task_id)
        task = task.with_profile(profile) if profile else task.with_profile(None)
    except Exception as exc:  # noqa: BLE001 - the task is not installed here: say so
        return None, f"the task {task_id} is not installed here ({type(exc).__name__}: {str(exc)[:200]})"
    note = ""
    if task.starter_dataset is not None:
        note = (f"the files that dataset '{task.starter_dataset.id}' supplies to the starter are not "
                "compared (the viewer does not prepare datasets)")
    entries: dict[str, _Entry] = {}
    folders = [p for _, p in task.starter_paths() if p is not None and p.is_dir()]
    for folder in folders:  # later folders win, as in the workspace
        read_folder(folder, entries)
    return entries, note


def starter_of(config: dict[str, Any]) -> tuple[str, str | None, dict[str, _Entry] | None, str]:
    """``(task id, profile, starter entries or None, note)`` of a run's config."""
    task: dict[str, Any] = config["task"] if isinstance(config.get("task"), dict) else {}
    run: dict[str, Any] = config["run"] if isinstance(config.get("run"), dict) else {}
    task_id = str(task.get("id") or run.get("task") or "")
    profile = task.get("profile") if isinstance(task.get("profile"), str) else None
    if not task_id:
        return task_id, profile, None, "config.json names no task"
    before, note = _starter(task_id, profile)
    return task_id, profile, before, note


def final_workspace_diff(run_path: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    """The run's ``workspace.tar.gz`` against its task's starter files (``None``
    without an archive)."""
    archive = run_path / "workspace.tar.gz"
    if archive.is_symlink() or not archive.is_file():
        return None
    task_id, profile, before, note = starter_of(config)
    try:
        after = read_archive(archive)
    except (OSError, tarfile.TarError, EOFError) as exc:
        return {"against": "", "files": [], "same": 0,
                "error": f"{archive}: cannot be read: {type(exc).__name__}: {exc}"}
    if before is None:
        out = compare({}, after, "nothing (no starter files found)")
        out["note"] = note
        return out
    out = compare(before, after, f"the starter files of {task_id}" + (f" (profile {profile})" if profile else ""))
    if note:
        out["note"] = note
    return out


def snapshot_diffs(run_path: Path, gradings: list[dict[str, Any]], starter: dict[str, _Entry] | None, *,
                   limit: int = 50) -> dict[int, dict[str, Any]]:
    """Per validate step, what changed in the files the grader reads since the
    previous validate snapshot (the first: against those of the starter files),
    as ``{step: comparison}``; at most ``limit`` of them.  A validate snapshot holds
    the submission files only, so the first comparison is limited to the paths it
    holds (a starter file the grader does not read is not "removed")."""
    out: dict[int, dict[str, Any]] = {}
    previous: tuple[int | None, str, dict[str, _Entry]] | None = None
    folder = run_path / "snapshots"
    for g in gradings:
        sha, step = g.get("snapshot_sha"), g.get("step")
        if g.get("kind") != "validate" or not isinstance(sha, str) or not isinstance(step, int):
            continue
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            continue
        path = folder / f"{sha}.tar.gz"
        if path.is_symlink() or not path.is_file():
            continue
        if previous is not None and previous[1] == sha:
            previous = (step, sha, previous[2])
            continue
        try:
            entries = read_archive(path)
        except (OSError, tarfile.TarError, EOFError):
            continue
        if previous is None:
            if starter is None:
                previous = (step, sha, entries)
                continue
            base = {k: v for k, v in starter.items() if k in entries}
            diff = compare(base, entries, "the starter files")
            diff["since"] = 0
        else:
            diff = compare(previous[2], entries, f"the snapshot of step #{previous[0]}")
            diff["since"] = previous[0]
        if diff["files"]:
            out[step] = diff
            if len(out) >= limit:
                break
        previous = (step, sha, entries)
    return out

"""Preparing a ResearchGym task for an episode: verified, split, cached.

A pack describes its task with a :class:`TaskLayout` and calls
:func:`prepare_task` from its dataset's ``prepare`` function.  The result is a
cache entry (under ``<cache>/researchgym/<task>-<tree[:12]>/``)::

    workspace/   the starter repository the agent edits (hidden files removed,
                 the pack's overlay copied on top)
    public/      shown read-only at the dataset's mount: source.json (commit, tree)
    private/     grader only: grading/, idea_hint.txt, blocked_urls.yaml,
                 requirements.txt, test labels the pack moved, leakage_policy.json
    manifest.json  SHA-256 of every file above, the tree, the layout's digest

Every call verifies the user's copy against the pinned tree when one is found
in the data folder (so an edited checkout is refused even if a good copy is
cached); without a data folder, a cache entry whose manifest matches is reused.
A damaged entry is rebuilt; an entry built from another layout (a pack
upgrade) is rebuilt too.

:func:`workspace_path` is known before anything is prepared (:mod:`rgym_researchgym.cache`);
a pack's dataset ``prepare`` returns the workspace as the dataset's starter: the runner prepares
datasets before it lays out the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import MANIFEST, file_digests, problems
from rgym_researchgym.cache import default_cache_dir, entry_path, workspace_path
from rgym_researchgym.leakage import policy_config, write_policy
from rgym_researchgym.pins import PINNED_COMMIT, REPOSITORY, TASKS_PATH, TREE_HASHES
from rgym_researchgym.taskdir import BlockedUrls, TaskDirectory, split_task

LAYOUT_VERSION = "1"
log = logging.getLogger("rgym.researchgym")

#: ``post_build(workspace, public, private)`` adds derived files after the split.
PostBuild = Callable[[Path, Path, Path], None]


@define(frozen=True)
class TaskLayout:
    """How a pack lays out one ResearchGym task.

    ``private_globs`` move files of the task directory to the grader's side
    (test labels); ``drop_globs`` leave files out; ``overlay`` is a folder of
    the pack copied over the workspace (rgym entry points, a README); and
    ``post_build`` may derive more files.  Bump ``version`` whenever
    ``post_build`` changes what it writes.
    """

    task: str
    private_globs: tuple[str, ...] = ()
    drop_globs: tuple[str, ...] = ()
    overlay: Path | None = None
    post_build: PostBuild | None = field(default=None, eq=False)
    version: str = "1"

    def digest(self) -> str:
        """Changes whenever the layout or the overlay's files change."""
        h = hashlib.sha256(json.dumps([LAYOUT_VERSION, self.task, self.version,
                                       list(self.private_globs), list(self.drop_globs)]).encode())
        if self.overlay is not None and self.overlay.is_dir():
            for path in sorted(self.overlay.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    h.update(path.relative_to(self.overlay).as_posix().encode() + b"\0")
                    h.update(path.read_bytes())
        return h.hexdigest()[:16]


@define(frozen=True)
class PreparedTask:
    """A prepared, verified task: the three folders and where the task came from."""

    task: str
    root: Path
    tree: str
    source: str

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"

    def directory(self) -> TaskDirectory:
        """The hidden files and the statement, read from the private side."""
        return TaskDirectory.read(self.private)

    def leakage(self) -> dict[str, Any]:
        """rgym's leakage settings from this task's ``blocked_urls.yaml``."""
        return policy_config(BlockedUrls.read(self.private / "blocked_urls.yaml"))


def _check_entry(root: Path, layout: TaskLayout) -> list[str]:
    """What is wrong with a cached entry: its files against its manifest (the core's
    :func:`rgym_core.dataset_cache.problems`), then the tree and the pack version it was
    built from."""
    damage = problems(root)
    if damage:
        return damage
    manifest = json.loads((root / MANIFEST).read_text())
    if manifest.get("tree") != TREE_HASHES[layout.task]:
        damage.append(f"{root / MANIFEST}: built from tree {manifest.get('tree')}")
    if manifest.get("layout") != layout.digest():
        damage.append(f"{root / MANIFEST}: built by another version of the pack")
    return damage


def _build(layout: TaskLayout, data_dir: Path | None, dest: Path) -> str:
    staging = dest / "_source"
    from rgym_researchgym.source import load_verified  # tarfile: only when building

    source = load_verified(data_dir, layout.task, staging)
    split_task(staging, dest / "workspace", dest / "private",
               private_globs=layout.private_globs, drop_globs=layout.drop_globs)
    shutil.rmtree(staging)
    if layout.overlay is not None and layout.overlay.is_dir():
        shutil.copytree(layout.overlay, dest / "workspace", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    public = dest / "public"
    public.mkdir()
    (public / "source.json").write_text(json.dumps({
        "repository": REPOSITORY, "commit": PINNED_COMMIT, "path": f"{TASKS_PATH}/{layout.task}",
        "tree": TREE_HASHES[layout.task]}, indent=2) + "\n")
    write_policy(BlockedUrls.read(dest / "private" / "blocked_urls.yaml"), dest / "private")
    if layout.post_build is not None:
        layout.post_build(dest / "workspace", public, dest / "private")
    _owner_only(dest / "private")
    manifest = {"task": layout.task, "tree": TREE_HASHES[layout.task], "commit": PINNED_COMMIT,
                "layout": layout.digest(), "source": source.describe(), "files": file_digests(dest)}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return source.describe()


def _owner_only(folder: Path) -> None:
    """The grader's side is readable by its owner only (folders 0700, files 0600)."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o700 if path.is_dir() else 0o600)


def prepare_task(layout: TaskLayout, cache_dir: Path | None, data_dir: Path | None) -> PreparedTask:
    """Verify, split and cache ``layout.task`` (see the module docstring).

    Raises :class:`~rgym_researchgym.source.TaskSourceError` (a
    ``DatasetError``) when no pinned copy is at hand or the user's copy differs
    from the pin, naming the task and both tree hashes.
    """
    from rgym_researchgym.source import TaskSourceError, find_task

    final = entry_path(layout.task, cache_dir)
    found = None
    if data_dir is not None:
        try:
            found = find_task(data_dir, layout.task)
        except TaskSourceError:
            found = None
    damage = _check_entry(final, layout) if final.exists() else ["not built"]
    if not damage and found is None:
        return _prepared(layout.task, final)
    if not damage and found is not None:
        from rgym_researchgym.source import verify

        verify(found)  # an edited checkout is refused even when a good copy is cached
        return _prepared(layout.task, final)
    if final.exists():
        log.warning("rebuilding the prepared copy of researchgym/%s: %s", layout.task,
                    "; ".join(damage[:3]))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{layout.task}-build-"))
    try:
        _build(layout, data_dir, tmp)
        os.chmod(tmp, 0o755)
        if final.exists():
            trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{layout.task}-old-"))
            os.replace(final, trash / "entry")
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _prepared(layout.task, final)


def _prepared(task: str, root: Path) -> PreparedTask:
    manifest = json.loads((root / MANIFEST).read_text())
    return PreparedTask(task=task, root=root, tree=manifest["tree"], source=manifest["source"])


__all__ = ["MANIFEST", "PreparedTask", "TaskLayout", "default_cache_dir", "entry_path", "prepare_task",
           "workspace_path"]

"""ResearchGym's task-directory format, read from a verified copy.

A task directory holds::

    task_description.md   the statement (goal, settings, metrics, baseline tables)
    grading/              ResearchGym's grader scripts        -> private
    idea_hint.txt         the withheld method in one paragraph -> private
    blocked_urls.yaml     the source paper's URLs and globs    -> private (drives leakage)
    requirements.txt      installed by ResearchGym's runtime  -> private
    install.sh            (improving-replay-buffers only)      -> private
    README.md, code ...   the starter repository               -> workspace

:func:`split_task` lays a copy out as the agent's ``workspace/`` and the
grader's ``private/`` (the hidden files above plus whatever a pack moves there,
such as test labels shipped in the repository).
"""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Iterable
from pathlib import Path

import yaml
from attrs import define, field

#: Files and folders of a task directory that never reach the agent's workspace.
HIDDEN = ("grading", "idea_hint.txt", "blocked_urls.yaml", "requirements.txt", "install.sh")
#: Left out of both sides.
DROPPED = (".git", "__pycache__", "*.pyc")


class TaskFormatError(ValueError):
    """A task directory does not follow ResearchGym's format; the message names the file."""


@define(frozen=True)
class BlockedUrls:
    """``blocked_urls.yaml``: ``urls`` (substrings of URLs) and ``patterns`` (globs)."""

    urls: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: Path) -> BlockedUrls:
        """Parse the file; a missing file is the empty list."""
        if not path.is_file():
            return cls()
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise TaskFormatError(f"{path}: not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise TaskFormatError(f"{path}: expected a mapping with 'urls' and 'patterns'")
        out: dict[str, tuple[str, ...]] = {}
        for key in ("urls", "patterns"):
            value = data.get(key) or []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TaskFormatError(f"{path}: '{key}' must be a list of strings")
            out[key] = tuple(v.strip() for v in value if v.strip())
        unknown = sorted(set(data) - {"urls", "patterns"})
        if unknown:
            raise TaskFormatError(f"{path}: unknown key(s) {', '.join(unknown)}; ResearchGym's "
                                  f"format has 'urls' and 'patterns'")
        return cls(urls=out["urls"], patterns=out["patterns"])


@define(frozen=True)
class TaskDirectory:
    """The parts of a ResearchGym task directory that rgym reads."""

    path: Path
    description: str
    idea_hint: str | None
    blocked: BlockedUrls
    requirements: tuple[str, ...] = field(factory=tuple)
    has_grading: bool = False

    @classmethod
    def read(cls, path: Path) -> TaskDirectory:
        """Read a task directory (a verified copy, or the ``private/`` side of a split,
        which holds the hidden files, plus ``task_description.md`` from the workspace)."""
        desc = path / "task_description.md"
        if not desc.is_file():
            raise TaskFormatError(f"{desc}: missing; every ResearchGym task has one")
        hint = path / "idea_hint.txt"
        req = path / "requirements.txt"
        requirements: tuple[str, ...] = ()
        if req.is_file():
            requirements = tuple(
                line.strip() for line in req.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.lstrip().startswith(("#", "-")))
        return cls(path=path, description=desc.read_text(encoding="utf-8"),
                   idea_hint=hint.read_text(encoding="utf-8").strip() if hint.is_file() else None,
                   blocked=BlockedUrls.read(path / "blocked_urls.yaml"),
                   requirements=requirements, has_grading=(path / "grading").is_dir())


def _matches(rel: str, patterns: Iterable[str]) -> bool:
    parts = rel.split("/")
    for pattern in patterns:
        if fnmatch.fnmatchcase(rel, pattern):
            return True
        if "/" not in pattern and any(fnmatch.fnmatchcase(p, pattern) for p in parts):
            return True
        if pattern.endswith("/**") and (rel == pattern[:-3] or rel.startswith(pattern[:-2])):
            return True
    return False


def split_task(task_dir: Path, workspace: Path, private: Path, *,
               private_globs: Iterable[str] = (), drop_globs: Iterable[str] = ()) -> dict[str, list[str]]:
    """Copy ``task_dir`` into ``workspace`` (agent) and ``private`` (grader only).

    ``HIDDEN`` entries at the top and files matching ``private_globs`` (POSIX
    paths relative to the task directory: ``eval/**/test.txt``) go to
    ``private`` at the same relative path; files matching ``drop_globs`` or
    ``DROPPED`` go nowhere.  ``task_description.md`` is in both.  Returns the
    relative paths placed on each side.
    """
    private_globs, drop_globs = list(private_globs), [*DROPPED, *drop_globs]
    placed: dict[str, list[str]] = {"workspace": [], "private": [], "dropped": []}
    workspace.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    for path in sorted(task_dir.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(task_dir).as_posix()
        top = rel.split("/", 1)[0]
        if path.is_symlink():
            raise TaskFormatError(f"{path}: a symlink; refusing to lay it out")
        if _matches(rel, drop_globs):
            placed["dropped"].append(rel)
            continue
        side = "private" if top in HIDDEN or _matches(rel, private_globs) else "workspace"
        target = (private if side == "private" else workspace) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        placed[side].append(rel)
        if rel == "task_description.md":
            shutil.copy2(path, private / rel)
    return placed

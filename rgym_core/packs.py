"""Helpers for pack authors: load task and dataset specs from a pack's files.

A task lives in a folder of its pack::

    tasks/blotto/
        task.yaml      # the TaskSpec
        starter/       # copied into the agent's workspace
        grader/        # hidden: only the grader ever sees these files

:func:`load_task` reads ``task.yaml`` and records the folder as the task's
``root`` so the runner can find ``starter/`` and ``grader/``.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

import attrs

from rgym_core.serialization import load_spec
from rgym_core.specs import DatasetSpec, TaskSpec

TASK_FILE = "task.yaml"


def load_task(path: Path | str) -> TaskSpec:
    """Load a task from its folder (or from a ``task.yaml`` path)."""
    path = Path(path)
    spec_file = path / TASK_FILE if path.is_dir() or not path.suffix else path
    task = load_spec(spec_file, TaskSpec)
    return attrs.evolve(task, root=spec_file.parent.resolve())


def load_dataset(path: Path | str) -> DatasetSpec:
    """Load a dataset spec file; relative ``path`` fields are relative to it."""
    path = Path(path)
    spec = load_spec(path, DatasetSpec)
    return attrs.evolve(spec, root=path.parent.resolve())


def load_tasks(folder: Path | str) -> list[TaskSpec]:
    """Load every ``*/task.yaml`` under ``folder``, sorted by folder name."""
    folder = Path(folder)
    return [load_task(p.parent) for p in sorted(folder.glob(f"*/{TASK_FILE}"))]


def package_path(package: str, *parts: str) -> Path:
    """The on-disk path of a folder shipped as package data (packs are installed
    unzipped, so this is a real path)."""
    ref = files(package).joinpath(*parts)
    with as_file(ref) as p:
        return Path(p)

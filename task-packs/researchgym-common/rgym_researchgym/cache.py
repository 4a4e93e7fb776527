"""Where prepared ResearchGym tasks live in rgym's cache: known before anything is
prepared, and light to import (a plugin's registration computes these paths)."""

from __future__ import annotations

from pathlib import Path

from rgym_researchgym.pins import TREE_HASHES, known_task

#: The prepared task's leakage policy, on the grader's side (``private/``).
POLICY_FILE = "leakage_policy.json"


def default_cache_dir() -> Path:
    """Where the runner's ``prepare_dataset`` caches datasets (``RGYM_CACHE_DIR``/datasets)."""
    from rgym_core import cache_root

    return cache_root() / "datasets"


def entry_path(task: str, cache_dir: Path | None = None) -> Path:
    """The cache entry of ``task`` (not necessarily built yet)."""
    known_task(task)
    return (cache_dir or default_cache_dir()) / "researchgym" / f"{task}-{TREE_HASHES[task][:12]}"


def workspace_path(task: str, cache_dir: Path | None = None) -> Path:
    """The prepared workspace folder of ``task`` (the starter files its dataset supplies)."""
    return entry_path(task, cache_dir) / "workspace"

"""Finding run directories and reading many of them at once, for the viewer
(:mod:`rgym_view.data`) and ``rgym analyze`` (:mod:`rgym_view.analysis`) alike."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TypeVar

from rgym_core import RunDir, iter_run_dirs

T = TypeVar("T")
R = TypeVar("R")


def iter_runs(paths: Iterable[Path | str]) -> Iterator[RunDir]:
    """Every run directory under ``paths``, once."""
    seen: set[str] = set()
    for path in paths:
        for run in iter_run_dirs(path):
            key = str(run.path.resolve())
            if key not in seen:
                seen.add(key)
                yield run


#: From this many runs on, :func:`parallel_map` reads them in a pool of processes.
PARALLEL_MIN_ITEMS = 48


def workers() -> int:
    """How many processes read runs: ``RGYM_VIEW_WORKERS``, else one per core (at most 8)."""
    raw = os.environ.get("RGYM_VIEW_WORKERS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, min(os.cpu_count() or 1, 8))


def parallel_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, in a pool of forked processes when there are many
    items and more than one core (``fn`` and its results must pickle)."""
    items = list(items)
    n = min(workers(), len(items))
    if n <= 1 or len(items) < PARALLEL_MIN_ITEMS or "fork" not in mp.get_all_start_methods():
        return [fn(x) for x in items]
    with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork")) as pool:
        return list(pool.map(fn, items, chunksize=max(1, len(items) // (n * 8))))


__all__ = ["PARALLEL_MIN_ITEMS", "iter_runs", "parallel_map", "workers"]

"""Saving and loading memory stores, safely shared by concurrent episodes.

A store folder holds immutable snapshots and a pointer to the current one::

    <folder>/CURRENT                    name of the current snapshot (replaced atomically)
    <folder>/snapshots/<name>/meta.json     embedder, dimension, counts
    <folder>/snapshots/<name>/records.jsonl one MemoryRecord per line
    <folder>/snapshots/<name>/vectors.npy   float32 (count, dim), row i = record i
    <folder>/snapshots/<name>/hnsw.faiss    the approximate index, when there is one
    <folder>/.lock                      flock: shared for readers, exclusive for writers

A writer takes the exclusive lock, re-reads the current snapshot, merges its own
records into it by ``uid`` (``merge=True``, so two episodes of a task that ran
at the same time both keep their memories), writes a new snapshot folder under
a temporary name, renames it, then atomically replaces ``CURRENT``.  A crash
leaves the previous snapshot current.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from attrs import define

from rgym_tools_memory.embedders import Embedder
from rgym_tools_memory.index import IndexConfig
from rgym_tools_memory.store import MemoryRecord, MemoryStore

FORMAT_VERSION = 1


class MemoryPersistenceError(Exception):
    """A saved store that cannot be used (unreadable, or made by another embedder)."""


@define(frozen=True)
class SaveInfo:
    """What :func:`save_store` wrote."""

    path: Path
    count: int
    added: int


@contextlib.contextmanager
def _locked(folder: Path, exclusive: bool) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _current(folder: Path) -> Path | None:
    pointer = folder / "CURRENT"
    if not pointer.is_file():
        return None
    name = pointer.read_text().strip()
    snapshot = folder / "snapshots" / name
    if not name or not snapshot.is_dir():
        raise MemoryPersistenceError(f"{pointer}: names snapshot {name!r}, which does not exist; "
                                     f"delete {folder} to start an empty memory")
    return snapshot


def _read_snapshot(snapshot: Path, embedder: Embedder) -> tuple[dict[str, Any],
                                                                 list[MemoryRecord], np.ndarray]:
    try:
        meta = json.loads((snapshot / "meta.json").read_text())
        records = [MemoryRecord.from_json(json.loads(line))
                   for line in (snapshot / "records.jsonl").read_text().splitlines() if line]
        vectors = np.load(snapshot / "vectors.npy")
    except (OSError, ValueError, KeyError) as exc:
        raise MemoryPersistenceError(f"{snapshot}: cannot read the saved memory ({exc}); "
                                     f"delete the folder to start an empty memory") from exc
    if meta.get("embedder") != embedder.name or int(meta.get("dim", -1)) != embedder.dim:
        raise MemoryPersistenceError(
            f"{snapshot}: memories were embedded with {meta.get('embedder')!r} "
            f"({meta.get('dim')} dims) but this episode uses {embedder.name!r} ({embedder.dim}); "
            f"select the same embedder (RGYM_MEMORY_EMBEDDER) or another RGYM_MEMORY_DIR")
    if len(records) != len(vectors) or vectors.ndim != 2:
        raise MemoryPersistenceError(f"{snapshot}: {len(records)} records but vectors of shape "
                                     f"{vectors.shape}; delete the folder to start afresh")
    return meta, records, vectors


def load_store(folder: Path, embedder: Embedder,
               config: IndexConfig | None = None) -> MemoryStore | None:
    """The store saved in ``folder``, or ``None`` when nothing was saved there yet."""
    folder = Path(folder)
    if not (folder / "CURRENT").is_file():
        return None
    with _locked(folder, exclusive=False):
        snapshot = _current(folder)
        if snapshot is None:
            return None
        meta, records, vectors = _read_snapshot(snapshot, embedder)
        store = MemoryStore(embedder, config)
        if records:
            store.add(records, vectors, build=False)
        hnsw = snapshot / "hnsw.faiss"
        covered = int(meta.get("hnsw_count") or 0)
        if hnsw.is_file() and 0 < covered <= len(records):
            with contextlib.suppress(RuntimeError, ValueError):  # rebuilt below when unusable
                store.index.set_approximate(faiss.read_index(str(hnsw)), covered)
    store.index.maybe_build()
    return store


def save_store(folder: Path, store: MemoryStore, *, merge: bool = False) -> SaveInfo:
    """Write ``store`` as the current snapshot of ``folder``.

    With ``merge``, records already saved there by other episodes are kept and
    only this store's new records (by ``uid``) are appended.
    """
    folder = Path(folder)
    with _locked(folder, exclusive=True):
        ours = store.records()
        vectors = store.index.vectors()[: len(ours)]
        main, covered = store.index.approximate_index()
        previous = _current(folder)
        records, added = ours, len(ours)
        if merge and previous is not None:
            _, saved, saved_vectors = _read_snapshot(previous, store.embedder)
            saved_uids = [r.uid for r in saved]
            known = set(saved_uids)
            new_ids = [i for i, r in enumerate(ours) if r.uid not in known]
            added = len(new_ids)
            if saved_uids != [r.uid for r in ours[: len(saved)]]:
                main = None  # our index's ids no longer match the merged order
            records = saved + [ours[i] for i in new_ids]
            vectors = np.concatenate([saved_vectors, vectors[new_ids]]) if new_ids else saved_vectors
        name = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        snapshots = folder / "snapshots"
        snapshots.mkdir(exist_ok=True)
        tmp = snapshots / f".tmp-{name}"
        tmp.mkdir()
        np.save(tmp / "vectors.npy", np.ascontiguousarray(vectors, dtype=np.float32))
        with open(tmp / "records.jsonl", "w") as out:
            for rec in records:
                out.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
        meta = {"format": FORMAT_VERSION, "embedder": store.embedder.name,
                "dim": store.embedder.dim, "count": len(records), "hnsw_count": 0}
        if main is not None and covered <= len(records):
            faiss.write_index(main, str(tmp / "hnsw.faiss"))
            meta["hnsw_count"] = covered
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        for path in tmp.iterdir():
            _fsync(path)
        final = snapshots / name
        os.rename(tmp, final)
        pointer_tmp = folder / f".CURRENT.{uuid.uuid4().hex[:8]}"
        pointer_tmp.write_text(name + "\n")
        _fsync(pointer_tmp)
        os.replace(pointer_tmp, folder / "CURRENT")
        for old in snapshots.iterdir():
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return SaveInfo(path=final, count=len(records), added=added)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

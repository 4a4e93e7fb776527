"""The vector index behind the memory store: exact while small, HNSW once large.

Vectors are unit-norm, so inner product is cosine similarity.  Below
``approx_threshold`` vectors every search is exact (``faiss.IndexFlatIP``).  Past
it, an ``IndexHNSWFlat`` (inner product, ``M=32``) is built in a background
thread while exact search keeps serving; its ``efSearch`` is tuned on the stored
vectors until recall@10 against exact search reaches ``target_recall``.  New
vectors always land in a small exact *delta* (the rows past those the HNSW index
covers, scanned with numpy) that is searched alongside the HNSW index, and are
merged into a copy of it in the background once the delta holds ``merge_every``
vectors, so :meth:`VectorIndex.add` only ever copies a few rows under a lock and
never waits for a build.  Searches hold the lock only to read which index and
how many rows to use; faiss then searches without it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import faiss as _faiss
import numpy as np
from attrs import define, field

#: faiss's SWIG bindings, used untyped.
faiss: Any = _faiss


@define(frozen=True)
class IndexConfig:
    """Tuning knobs of :class:`VectorIndex` (the defaults suit up to a few 100k memories)."""

    #: Stores with at least this many vectors get an approximate (HNSW) index.
    approx_threshold: int = 20_000
    #: Delta size that triggers merging new vectors into the HNSW index.
    merge_every: int = 2_000
    hnsw_m: int = 32
    ef_construction: int = 64
    #: recall@10 against exact search that the efSearch tuning aims for.
    target_recall: float = 0.95
    ef_candidates: tuple[int, ...] = (32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 160, 192,
                                      256, 384, 512)
    tune_queries: int = 200
    #: Build in a background thread (``False`` builds inside ``add``, for tests).
    background: bool = True


@contextlib.contextmanager
def _single_threaded() -> Iterator[None]:
    """Run faiss single-threaded in this thread (one query gains nothing from an
    OpenMP team, and waking one costs more than the search on a busy host).
    OpenMP thread counts are per thread, so a background build keeps its cores."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class _Rows:
    """Append-only float32 rows kept in fixed-size chunks, so growing never copies."""

    def __init__(self, dim: int, chunk: int = 8192) -> None:
        self.dim = dim
        self.chunk = chunk
        self._chunks: list[np.ndarray] = []
        self.count = 0

    def append(self, vectors: np.ndarray) -> None:
        done = 0
        while done < len(vectors):
            slot = self.count % self.chunk
            if slot == 0 and self.count // self.chunk == len(self._chunks):
                self._chunks.append(np.empty((self.chunk, self.dim), dtype=np.float32))
            take = min(self.chunk - slot, len(vectors) - done)
            self._chunks[self.count // self.chunk][slot:slot + take] = vectors[done:done + take]
            self.count += take
            done += take

    def blocks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, Any]]:
        """Yield ``(offset, view)`` pairs covering rows ``start:stop`` without copying."""
        stop = self.count if stop is None else min(stop, self.count)
        pos = start
        while pos < stop:
            c, slot = divmod(pos, self.chunk)
            take = min(self.chunk - slot, stop - pos)
            yield pos, self._chunks[c][slot:slot + take]
            pos += take

    def slice(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        parts = [view for _, view in self.blocks(start, stop)]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def take(self, ids: np.ndarray) -> np.ndarray:
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        c, slot = np.divmod(ids, self.chunk)
        for chunk in np.unique(c):
            sel = c == chunk
            out[sel] = self._chunks[int(chunk)][slot[sel]]
        return out

    def top_one(self, q: np.ndarray, k: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact best ``k`` (scores, ids) of one query ``q`` (1-d) over rows ``start:stop``,
        unordered.  Rows below ``stop`` are never rewritten, so no lock is needed."""
        parts = [view @ q for _, view in self.blocks(start, stop)]
        scores = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(scores) <= k:
            return scores, np.arange(start, start + len(scores))
        top = np.argpartition(scores, len(scores) - k)[-k:]
        return scores[top], top + start

    def topk(self, queries: np.ndarray, k: int, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` inner products of ``queries`` over rows ``0:stop`` (numpy)."""
        best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(queries), 0), dtype=np.int64)
        for offset, view in self.blocks(0, stop):
            scores = queries @ view.T
            ids = np.broadcast_to(np.arange(offset, offset + len(view)), scores.shape)
            best_s = np.concatenate([best_s, scores], axis=1)
            best_i = np.concatenate([best_i, ids], axis=1)
            if best_s.shape[1] > k:
                part = np.argpartition(-best_s, k - 1, axis=1)[:, :k]
                best_s = np.take_along_axis(best_s, part, axis=1)
                best_i = np.take_along_axis(best_i, part, axis=1)
        order = np.argsort(-best_s, axis=1, kind="stable")
        return np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_i, order, axis=1)


@define
class IndexStats:
    """What the index did, for status output, trajectories and the benchmark."""

    builds: int = 0
    last_build_s: float = 0.0
    ef_search: int = 0
    measured_recall: float | None = None
    #: Longest time one ``add`` held the index (the write path's blocking time).
    max_add_s: float = 0.0
    errors: list[str] = field(factory=list)


class VectorIndex:
    """Exact + HNSW + delta search over unit-norm vectors with ids ``0..count-1``."""

    def __init__(self, dim: int, config: IndexConfig | None = None) -> None:
        self.dim = dim
        self.config = config or IndexConfig()
        self.stats = IndexStats()
        self._rows = _Rows(dim)
        self._lock = threading.Lock()
        self._main: Any = None
        self._main_count = 0
        self._builder: threading.Thread | None = None
        #: Called (from the builder thread) after each swap; tests and benchmarks use it.
        self.on_swap: Callable[[int], None] | None = None

    # -- state ---------------------------------------------------------------

    @property
    def count(self) -> int:
        return self._rows.count

    @property
    def mode(self) -> str:
        """``exact``, ``exact+building``, ``hnsw`` or ``hnsw+merging``."""
        base = "hnsw" if self._main is not None else "exact"
        if self.building:
            return base + ("+merging" if self._main is not None else "+building")
        return base

    @property
    def building(self) -> bool:
        return self._builder is not None and self._builder.is_alive()

    @property
    def approx_count(self) -> int:
        """How many vectors the HNSW index covers (the rest are in the exact delta)."""
        return self._main_count

    def vectors(self) -> np.ndarray:
        """A copy of every stored vector, in id order."""
        return self._rows.slice()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for background building to finish; ``True`` when nothing is running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            builder = self._builder
            if builder is None or not builder.is_alive():
                return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            builder.join(remaining)

    # -- writing -------------------------------------------------------------

    def add(self, vectors: np.ndarray, *, build: bool = True) -> int:
        """Append rows (already normalised); returns the id of the first one.

        ``build=False`` leaves starting a (re)build to a later :meth:`maybe_build`.
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        started = time.perf_counter()
        with self._lock:
            first = self._rows.count
            self._rows.append(vectors)
            held = time.perf_counter() - started
        self.stats.max_add_s = max(self.stats.max_add_s, held)
        if build:
            self.maybe_build()
        return first

    def set_approximate(self, index: Any, covered: int) -> None:
        """Install a saved HNSW index covering the first ``covered`` ids."""
        if covered > self.count or index.ntotal != covered or index.d != self.dim:
            raise ValueError(f"saved HNSW index covers {index.ntotal} vectors of dimension "
                             f"{index.d}, not {covered} of {self.dim}")
        with self._lock:
            self._main, self._main_count = index, covered
        self.stats.ef_search = int(index.hnsw.efSearch)

    def approximate_index(self) -> tuple[Any, int]:
        """The HNSW index and how many ids it covers (``(None, 0)`` when exact)."""
        with self._lock:
            return self._main, self._main_count

    def maybe_build(self) -> None:
        """Start building or extending the HNSW index if the store has grown enough."""
        cfg = self.config
        if self.building:
            return
        pending = self.count - self._main_count
        if self._main is None and self.count < cfg.approx_threshold:
            return
        if self._main is not None and pending < cfg.merge_every:
            return
        if cfg.background:
            self._builder = threading.Thread(target=self._build_loop, name="rgym-memory-index",
                                             daemon=True)
            self._builder.start()
        else:
            self._build_loop()

    def _build_loop(self) -> None:
        while True:
            try:
                self._build_once()
            except Exception as exc:  # keep serving exact search; report the failure
                self.stats.errors.append(f"{type(exc).__name__}: {exc}")
                return
            if self.count - self._main_count < self.config.merge_every:
                return

    def _build_once(self) -> None:
        cfg = self.config
        started = time.perf_counter()
        snapshot = self.count
        base, base_count = self._main, self._main_count
        if base is None:
            index = faiss.IndexHNSWFlat(self.dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.ef_construction
        else:
            index = faiss.clone_index(base)
        # chunk by chunk: no big copy, and faiss releases the GIL while it adds
        for _, view in self._rows.blocks(base_count if base is not None else 0, snapshot):
            index.add(view)
        self._tune(index, snapshot)
        with self._lock:
            self._main, self._main_count = index, snapshot
        self.stats.builds += 1
        self.stats.last_build_s = time.perf_counter() - started
        if self.on_swap is not None:
            self.on_swap(snapshot)

    def _tune(self, index: Any, covered: int, k: int = 10) -> None:
        """Smallest efSearch whose recall@k against exact search meets the target.

        The tuning queries imitate fresh queries: each is a sampled stored
        vector turned away from itself, half way to the similarity of its
        nearest neighbour (a stored vector used as it is would be found through
        its own graph edges and overstate recall; turned all the way, recall is
        understated).  On 100k embedding-like vectors, tuning recall 0.95 gave
        recall@10 0.98 for fresh queries.
        """
        cfg = self.config
        rng = np.random.default_rng(covered)
        sample = np.sort(rng.choice(covered, size=min(cfg.tune_queries, covered), replace=False))
        base = self._rows.take(sample)
        near, _ = self._rows.topk(base, 2, stop=covered)
        cos = np.clip((1.0 + near[:, 1:2]) / 2, 0.0, 0.999)
        noise = rng.standard_normal(base.shape).astype(np.float32)
        noise -= (noise * base).sum(axis=1, keepdims=True) * base
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        queries = np.ascontiguousarray(cos * base + np.sqrt(1 - cos**2) * noise, dtype=np.float32)
        _, truth = self._rows.topk(queries, k, stop=covered)
        recall = 0.0
        for ef in cfg.ef_candidates:
            index.hnsw.efSearch = ef
            _, found = index.search(queries, k)
            recall = _recall(found, truth)
            if recall >= cfg.target_recall:
                break
        self.stats.ef_search = int(index.hnsw.efSearch)
        self.stats.measured_recall = round(recall, 4)

    # -- searching -----------------------------------------------------------

    def search(self, query: np.ndarray, k: int,
               ids: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first, optionally among ``ids`` only."""
        if k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dim)  # a view, no copy
        with self._lock:  # only to read a consistent (index, covered, count) triple
            main, covered, total = self._main, self._main_count, self._rows.count
        if total == 0:
            return []
        if ids is not None:
            return self._search_among(q, k, np.asarray(ids, dtype=np.int64), main, covered)
        if main is None:
            scores, found = self._rows.top_one(q, k, 0, total)
        else:
            with _single_threaded():
                scores, found = main.search(q.reshape(1, self.dim), min(k, covered))
            scores, found = scores[0], found[0]
            if total > covered:  # the delta: rows added since the HNSW index was built
                d_scores, d_found = self._rows.top_one(q, k, covered, total)
                scores = np.concatenate([scores, d_scores])
                found = np.concatenate([found, d_found])
            if (found < 0).any():  # HNSW pads a short answer with -1
                keep = found >= 0
                scores, found = scores[keep], found[keep]
        order = np.argsort(-scores, kind="stable")[:k]
        return list(zip(found[order].tolist(), scores[order].tolist(), strict=True))

    def _search_among(self, q: np.ndarray, k: int, ids: np.ndarray, main: Any,
                      covered: int) -> list[tuple[int, float]]:
        if len(ids) == 0:
            return []
        if main is None or len(ids) <= self.config.approx_threshold:
            scores = self._rows.take(ids) @ q
            top = np.argsort(-scores, kind="stable")[:k]
            return list(zip(ids[top].tolist(), scores[top].tolist(), strict=True))
        inside = ids[ids < covered]
        scores, found = np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        if len(inside):
            params = faiss.SearchParametersHNSW(sel=faiss.IDSelectorBatch(inside),
                                                efSearch=max(int(main.hnsw.efSearch), 4 * k))
            with _single_threaded():
                scores, found = main.search(q.reshape(1, self.dim), min(k, len(inside)),
                                            params=params)
            scores, found = scores[0], found[0]
        outside = ids[ids >= covered]
        if len(outside):
            scores = np.concatenate([scores, self._rows.take(outside) @ q])
            found = np.concatenate([found, outside])
        keep = found >= 0
        scores, found = scores[keep], found[keep]
        order = np.argsort(-scores, kind="stable")[:k]
        return list(zip(found[order].tolist(), scores[order].tolist(), strict=True))

    def search_exact(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` (scores, ids) for a batch of queries, by numpy over all rows."""
        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        return self._rows.topk(q, k)


def _recall(found: np.ndarray, truth: np.ndarray, exclude: np.ndarray | None = None) -> float:
    """Mean recall of ``found`` against ``truth`` rows (best first).

    With ``exclude`` (leave-one-out: each query is a stored vector), that row's
    own id is dropped from both sides and one fewer true neighbour is expected.
    """
    total = hits = 0
    for row in range(len(truth)):
        want = [int(i) for i in truth[row] if i >= 0]
        got = {int(i) for i in found[row] if i >= 0}
        if exclude is not None:
            own = int(exclude[row])
            want = [i for i in want if i != own][: len(truth[row]) - 1]
            got.discard(own)
        total += len(want)
        hits += len(set(want) & got)
    return hits / total if total else 1.0


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean fraction of each ``truth`` row found in the matching ``found`` row."""
    return _recall(found, truth)

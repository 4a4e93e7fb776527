"""The vector index and the store: exact/HNSW switch, delta merges, tags, k > count."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from rgym_tools_memory.embedders import HashingEmbedder, normalise
from rgym_tools_memory.index import IndexConfig, VectorIndex, recall_at_k
from rgym_tools_memory.store import MemoryStore, clean_tags

DIM = 32


def clustered(n: int, seed: int = 0, dim: int = DIM, centers: int = 50) -> np.ndarray:
    """Unit vectors around random topic centres (embedding-like structure)."""
    rng = np.random.default_rng(seed)
    c = normalise(rng.standard_normal((centers, dim)))
    return normalise(c[rng.integers(0, centers, n)] + 0.25 * rng.standard_normal((n, dim)))


def sync_config(**kw: int) -> IndexConfig:
    return IndexConfig(background=False, **kw)  # type: ignore[arg-type]


def ids_of(hits: list[tuple[int, float]]) -> list[int]:
    return [i for i, _ in hits]


def test_small_store_is_exact_and_finds_each_vector_first() -> None:
    x = clustered(300)
    index = VectorIndex(DIM, sync_config(approx_threshold=1000))
    index.add(x)
    assert index.mode == "exact" and index.approx_count == 0
    for i in (0, 57, 299):
        hits = index.search(x[i], 5)
        assert hits[0][0] == i and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    scores, found = index.search_exact(x[:3], 5)
    assert found[:, 0].tolist() == [0, 1, 2]


def test_switches_to_hnsw_at_threshold_and_keeps_recall() -> None:
    x = clustered(1500)
    index = VectorIndex(DIM, sync_config(approx_threshold=1000, merge_every=10_000))
    index.add(x[:999])
    assert index.mode == "exact"
    index.add(x[999:1000])
    assert index.mode == "hnsw" and index.approx_count == 1000 and index.stats.builds == 1
    assert index.stats.measured_recall is not None and index.stats.measured_recall >= 0.95
    index.add(x[1000:])  # below merge_every: these stay in the exact delta
    assert index.approx_count == 1000 and index.count == 1500
    queries = clustered(100, seed=7)
    _, truth = index.search_exact(queries, 10)
    found = np.array([ids_of(index.search(q, 10)) for q in queries])
    assert recall_at_k(found, truth) >= 0.95


def test_vectors_in_the_delta_are_found_and_merged_later() -> None:
    x = clustered(1300)
    index = VectorIndex(DIM, sync_config(approx_threshold=1000, merge_every=200))
    index.add(x[:1000])
    assert index.approx_count == 1000
    index.add(x[1000:1199])
    assert index.approx_count == 1000  # 199 pending < merge_every
    assert index.search(x[1100], 1)[0][0] == 1100  # served from the delta
    index.add(x[1199:1200])
    assert index.approx_count == 1200 and index.stats.builds == 2  # merged into a copy
    index.add(x[1200:])
    assert index.search(x[1250], 1)[0][0] == 1250
    assert index.search(x[5], 1)[0][0] == 5


def test_background_build_keeps_serving_and_loses_no_write() -> None:
    x = clustered(3000)
    index = VectorIndex(DIM, IndexConfig(approx_threshold=1000, merge_every=500))
    swapped = threading.Event()
    index.on_swap = lambda covered: swapped.set()
    for start in range(0, 3000, 25):
        index.add(x[start:start + 25])
        last = start + 24
        assert index.search(x[last], 1)[0][0] == last  # always searchable at once
    assert index.wait(timeout=60)
    assert swapped.is_set() and index.stats.errors == []
    assert index.mode == "hnsw" and index.count == 3000
    assert index.approx_count + (index.count - index.approx_count) == 3000
    found = [index.search(x[i], 1)[0][0] for i in range(0, 3000, 97)]
    assert found == list(range(0, 3000, 97))


def test_k_larger_than_count_and_empty_index() -> None:
    index = VectorIndex(DIM, sync_config())
    assert index.search(clustered(1)[0], 5) == []
    index.add(clustered(3))
    assert len(index.search(clustered(1, seed=3)[0], 10)) == 3
    big = VectorIndex(DIM, sync_config(approx_threshold=50, merge_every=1000))
    big.add(clustered(60))
    assert big.mode == "hnsw"
    big.add(clustered(2, seed=9))
    hits = big.search(clustered(1, seed=4)[0], 100)
    assert sorted(ids_of(hits)) == list(range(62))


def test_search_among_ids_exact_and_with_hnsw_selector() -> None:
    x = clustered(2000)
    index = VectorIndex(DIM, sync_config(approx_threshold=500, merge_every=10_000))
    index.add(x[:1500])
    index.add(x[1500:])  # 500 in the delta
    evens = np.arange(0, 2000, 2)
    for q in (x[10], x[11], x[1601]):
        hits = index.search(q, 5, ids=evens)
        assert hits and all(i % 2 == 0 for i, _ in hits)  # selector path: 1000 > threshold
    small = np.array([3, 1601, 42])
    assert sorted(ids_of(index.search(x[0], 10, ids=small))) == [3, 42, 1601]
    assert index.search(x[1601], 1, ids=small)[0][0] == 1601
    assert index.search(x[0], 3, ids=np.array([], dtype=np.int64)) == []


def test_store_tags_filter_and_status_counts() -> None:
    store = MemoryStore(HashingEmbedder(), sync_config())
    store.write("learning rate 0.1 diverged after two epochs", ["lr", "failed"])
    store.write("learning rate 0.001 converged slowly", ["lr"])
    store.write("batch size 512 ran out of GPU memory", "failed, oom")
    hits = store.read("learning rate diverged", k=5, tags=["failed"])
    assert [h.record.text for h in hits][0].startswith("learning rate 0.1")
    assert {h.id for h in hits} == {0, 2}
    assert store.read("anything", tags=["nope"]) == []
    assert store.top_tags(2) == ["failed", "lr"]
    assert store.tag_counts()["oom"] == 1
    assert store.read("batch size memory", k=1)[0].record.tags == ("failed", "oom")


def test_clean_tags_and_bad_input() -> None:
    assert clean_tags(" LR, lr ,results,, ") == ("lr", "results")
    assert clean_tags(None) == ()
    with pytest.raises(ValueError, match="longer than"):
        clean_tags(["x" * 65])
    store = MemoryStore(HashingEmbedder(), sync_config())
    with pytest.raises(ValueError, match="empty"):
        store.write("   ")
    with pytest.raises(ValueError, match="dimension"):
        store.add([], np.zeros((0, 7)))

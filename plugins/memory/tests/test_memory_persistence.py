"""Saving and loading stores: round trips, saved HNSW indexes, merges, concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from rgym_tools_memory.embedders import HashingEmbedder
from rgym_tools_memory.index import IndexConfig
from rgym_tools_memory.persistence import MemoryPersistenceError, load_store, save_store
from rgym_tools_memory.store import MemoryRecord, MemoryStore

SYNC = IndexConfig(background=False, approx_threshold=200, merge_every=100)


def filled(n: int, embedder: HashingEmbedder | None = None, prefix: str = "note") -> MemoryStore:
    store = MemoryStore(embedder or HashingEmbedder(), SYNC)
    for i in range(n):
        store.write(f"{prefix} {i} about topic {i % 5}", [f"topic{i % 5}"], episode_id="ep", step=i)
    return store


def test_round_trip_keeps_records_vectors_and_search(tmp_path: Path) -> None:
    store = filled(30)
    info = save_store(tmp_path / "mem", store)
    assert info.count == 30 and info.added == 30
    meta = json.loads((info.path / "meta.json").read_text())
    assert meta["embedder"] == "hashing-64" and meta["hnsw_count"] == 0
    loaded = load_store(tmp_path / "mem", HashingEmbedder(), SYNC)
    assert loaded is not None and loaded.count == 30
    assert loaded.records() == store.records()
    np.testing.assert_array_equal(loaded.index.vectors(), store.index.vectors())
    hit = loaded.read("note 17 about topic 2", k=1)[0]
    assert hit.id == 17 and hit.record.step == 17 and hit.record.tags == ("topic2",)
    assert loaded.top_tags(1) == store.top_tags(1)


def test_missing_folder_loads_nothing(tmp_path: Path) -> None:
    assert load_store(tmp_path / "none", HashingEmbedder()) is None


def test_saved_hnsw_index_is_reused(tmp_path: Path) -> None:
    store = filled(250)
    assert store.index.mode == "hnsw" and store.index.approx_count == 200
    info = save_store(tmp_path / "mem", store)
    assert (info.path / "hnsw.faiss").is_file()
    loaded = load_store(tmp_path / "mem", HashingEmbedder(), SYNC)
    assert loaded is not None and loaded.index.approx_count == 200
    assert loaded.index.stats.builds == 0  # installed, not rebuilt
    assert loaded.read("note 230 about topic 0", k=1)[0].id == 230
    assert loaded.read("note 12 about topic 2", k=1)[0].id == 12


def test_other_embedder_is_a_clear_error(tmp_path: Path) -> None:
    save_store(tmp_path / "mem", filled(3))
    with pytest.raises(MemoryPersistenceError, match="hashing-64.*hashing-32.*RGYM_MEMORY_EMBEDDER"):
        load_store(tmp_path / "mem", HashingEmbedder(32))


def test_merge_keeps_memories_of_both_episodes(tmp_path: Path) -> None:
    folder = tmp_path / "task"
    first = filled(5, prefix="first")
    save_store(folder, first, merge=True)
    second = load_store(folder, HashingEmbedder(), SYNC)
    third = load_store(folder, HashingEmbedder(), SYNC)  # ran at the same time as `second`
    assert second is not None and third is not None
    second.write("second episode found a better learning rate", ["lr"])
    third.write("third episode tried a bigger model", ["model"])
    assert save_store(folder, second, merge=True).added == 1
    info = save_store(folder, third, merge=True)
    assert info.added == 1 and info.count == 7
    merged = load_store(folder, HashingEmbedder(), SYNC)
    assert merged is not None
    texts = [r.text for r in merged.records()]
    assert texts[:5] == [f"first {i} about topic {i}" for i in range(5)]
    assert set(texts[5:]) == {"second episode found a better learning rate",
                              "third episode tried a bigger model"}
    assert merged.read("bigger model", k=1)[0].record.tags == ("model",)
    assert len(list((folder / "snapshots").iterdir())) == 1  # old snapshots removed


def test_a_crashed_writer_leaves_the_previous_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    save_store(folder, filled(4))
    (folder / "snapshots" / ".tmp-crashed").mkdir()  # a writer died half-way
    (folder / "snapshots" / ".tmp-crashed" / "vectors.npy").write_bytes(b"garbage")
    loaded = load_store(folder, HashingEmbedder(), SYNC)
    assert loaded is not None and loaded.count == 4
    save_store(folder, loaded)
    assert not (folder / "snapshots" / ".tmp-crashed").exists()


def test_corrupt_pointer_names_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    save_store(folder, filled(2))
    (folder / "CURRENT").write_text("gone\n")
    with pytest.raises(MemoryPersistenceError, match="mem/CURRENT.*delete"):
        load_store(folder, HashingEmbedder())


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from rgym_tools_memory.embedders import HashingEmbedder
    from rgym_tools_memory.persistence import load_store, save_store
    from rgym_tools_memory.store import MemoryStore
    folder, name = Path(sys.argv[1]), sys.argv[2]
    for round in range(3):
        store = load_store(folder, HashingEmbedder()) or MemoryStore(HashingEmbedder())
        for i in range(5):
            store.write(f"{name} round {round} note {i}", [name])
        save_store(folder, store, merge=True)
""")


def test_concurrent_processes_never_lose_memories(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), f"w{n}"],
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = load_store(folder, HashingEmbedder())
    assert store is not None
    texts = sorted(r.text for r in store.records())
    assert texts == sorted(f"w{n} round {r} note {i}"
                           for n in range(4) for r in range(3) for i in range(5))
    assert len({r.uid for r in store.records()}) == 60


def test_record_json_round_trip() -> None:
    rec = MemoryRecord(text="t", tags=("a", "b"), episode_id="e", step=3)
    assert MemoryRecord.from_json(json.loads(json.dumps(rec.to_json()))) == rec

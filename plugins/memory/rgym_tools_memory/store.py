"""The memory store: texts with tags, their embeddings and the vector index over them."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from attrs import asdict, define, field

from rgym_tools_memory.embedders import Embedder
from rgym_tools_memory.index import IndexConfig, VectorIndex

MAX_TAGS = 16
MAX_TAG_CHARS = 64


@define(frozen=True)
class MemoryRecord:
    """One stored memory.  ``uid`` identifies it across episodes and merges."""

    text: str
    tags: tuple[str, ...] = ()
    uid: str = field(factory=lambda: uuid.uuid4().hex)
    created: str = field(factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    episode_id: str = ""
    step: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryRecord:
        return cls(text=str(data["text"]), tags=tuple(data.get("tags") or ()),
                   uid=str(data["uid"]), created=str(data.get("created", "")),
                   episode_id=str(data.get("episode_id", "")), step=data.get("step"))


@define(frozen=True)
class SearchHit:
    """A search result: the record, its id in the store and its cosine similarity."""

    id: int
    score: float
    record: MemoryRecord


def clean_tags(tags: Iterable[str] | str | None) -> tuple[str, ...]:
    """Tags stripped, lowercased and de-duplicated, in order; a string is split on commas."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for tag in tags:
        tag = str(tag).strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise ValueError(f"tag {tag[:20]!r}... is longer than {MAX_TAG_CHARS} characters")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags per memory, got {len(out)}")
    return tuple(out)


class MemoryStore:
    """Memories, embedded by ``embedder`` and searched through a :class:`VectorIndex`."""

    def __init__(self, embedder: Embedder, config: IndexConfig | None = None) -> None:
        self.embedder = embedder
        self.index = VectorIndex(embedder.dim, config)
        self._records: list[MemoryRecord] = []
        self._by_tag: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        #: Timings of the last write/read (seconds): ``embed``, ``index``/``search``.
        self.last_timings: dict[str, float] = {}

    @property
    def count(self) -> int:
        return len(self._records)

    def records(self) -> list[MemoryRecord]:
        with self._lock:
            return list(self._records)

    def record(self, id: int) -> MemoryRecord:
        return self._records[id]

    def uids(self) -> list[str]:
        with self._lock:
            return [r.uid for r in self._records]

    # -- writing -------------------------------------------------------------

    def write(self, text: str, tags: Iterable[str] | str | None = None, *,
              episode_id: str = "", step: int | None = None) -> tuple[int, MemoryRecord]:
        """Embed and store one memory; returns its id and record."""
        if not text.strip():
            raise ValueError("memory text is empty")
        record = MemoryRecord(text=text, tags=clean_tags(tags), episode_id=episode_id, step=step)
        started = time.perf_counter()
        vector = self.embedder.embed([text])
        embedded = time.perf_counter()
        (id_,) = self.add([record], vector)
        self.last_timings = {"embed": embedded - started, "index": time.perf_counter() - embedded}
        return id_, record

    def add(self, records: Sequence[MemoryRecord], vectors: np.ndarray, *,
            build: bool = True) -> list[int]:
        """Store already-embedded records (bulk loading, merges); returns their ids."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors.reshape(1, -1)
        if vectors.ndim != 2 or vectors.shape[1] != self.embedder.dim:
            raise ValueError(f"vectors have shape {vectors.shape}, the embedder "
                             f"{self.embedder.name!r} makes dimension {self.embedder.dim}")
        if len(vectors) != len(records):
            raise ValueError(f"{len(records)} records but {len(vectors)} vectors")
        with self._lock:
            first = len(self._records)
            ids = list(range(first, first + len(records)))
            self._records.extend(records)
            for id_, rec in zip(ids, records, strict=True):
                for tag in rec.tags:
                    self._by_tag.setdefault(tag, []).append(id_)
            got = self.index.add(vectors, build=build)
        assert got == first, "index and records out of step"
        return ids

    # -- reading -------------------------------------------------------------

    def read(self, query: str, k: int = 5,
             tags: Iterable[str] | str | None = None) -> list[SearchHit]:
        """The ``k`` memories most similar to ``query`` (cosine), best first.

        With ``tags``, only memories carrying at least one of them are searched.
        """
        if not query.strip():
            raise ValueError("query is empty")
        wanted = clean_tags(tags)
        started = time.perf_counter()
        vector = self.embedder.embed([query])[0]
        embedded = time.perf_counter()
        hits = self.search_vector(vector, k, wanted)
        self.last_timings = {"embed": embedded - started, "search": time.perf_counter() - embedded}
        return hits

    def search_vector(self, vector: np.ndarray, k: int,
                      tags: Sequence[str] = ()) -> list[SearchHit]:
        """Search with an already-embedded query."""
        ids = None
        if tags:
            with self._lock:
                ids = np.array(sorted({i for t in tags for i in self._by_tag.get(t, [])}),
                               dtype=np.int64)
        found = self.index.search(vector, k, ids)
        return [SearchHit(id=i, score=s, record=self._records[i]) for i, s in found]

    # -- status --------------------------------------------------------------

    def tag_counts(self) -> Counter[str]:
        with self._lock:
            return Counter({tag: len(ids) for tag, ids in self._by_tag.items()})

    def top_tags(self, n: int = 10) -> list[str]:
        """The ``n`` most used tags (ties broken alphabetically)."""
        counts = self.tag_counts()
        return [tag for tag, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]

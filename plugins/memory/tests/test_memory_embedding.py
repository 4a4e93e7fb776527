"""The real all-MiniLM-L6-v2 model (loaded once, offline): semantic ranking end to end."""

from __future__ import annotations

import numpy as np
import pytest
from rgym_tools_memory.embedders import MiniLMEmbedder, make_embedder
from rgym_tools_memory.index import IndexConfig
from rgym_tools_memory.store import MemoryRecord, MemoryStore

pytestmark = pytest.mark.slow  # loads the model once (a few seconds)

NOTES = {
    "lr": "Lowering the learning rate from 1e-3 to 3e-4 fixed the divergence in training.",
    "oom": "Batch size 512 crashed with CUDA out of memory; 128 fits on the GPU.",
    "aug": "Random crops and horizontal flips improved CIFAR-10 test accuracy by two points.",
    "leak": "The validation split overlapped the training data, so scores were inflated.",
    "rl": "PPO on Breakout learned faster with 64 parallel environments than with 8.",
    "tok": "The tokenizer lowercases text, so case-sensitive features are lost.",
    "ens": "Averaging the predictions of five seeds beat the best single model.",
    "time": "Each epoch takes about four minutes, so twenty epochs fit in the time budget.",
}
QUERIES = {
    "lr": "which learning rate stopped the loss from exploding?",
    "oom": "GPU memory error with large batches",
    "aug": "did flipping and cropping the images raise accuracy?",
    "leak": "train and validation sets share examples",
    "rl": "number of environments for reinforcement learning agents",
    "ens": "combining several models trained with different random seeds",
    "time": "how long does one pass over the data take",
}


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    model = make_embedder("minilm")
    assert isinstance(model, MiniLMEmbedder)
    return model


def test_vectors_are_normalised_384d_and_deterministic(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(["a note about training", "a note about training", "zebra"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    assert float(vectors[0] @ vectors[2]) < 0.5
    assert embedder.embed([]).shape == (0, 384)


def test_paraphrased_queries_find_their_note_first(embedder: MiniLMEmbedder) -> None:
    store = MemoryStore(embedder, IndexConfig(background=False))
    keys = list(NOTES)
    for key in keys:
        store.write(NOTES[key], [key])
    for key, query in QUERIES.items():
        hits = store.read(query, k=3)
        assert hits[0].record.tags == (key,), (query, [h.record.text for h in hits])
        assert hits[0].score > hits[1].score


def test_semantic_ranking_survives_the_hnsw_switch(embedder: MiniLMEmbedder) -> None:
    store = MemoryStore(embedder, IndexConfig(background=False, approx_threshold=40,
                                              merge_every=20))
    fillers = [f"Run {i}: changed hyperparameter set {i % 13} and logged metric {i % 7}."
               for i in range(60)]
    for key in NOTES:
        store.write(NOTES[key], [key])
    store.add([MemoryRecord(text=t, tags=("filler",)) for t in fillers], embedder.embed(fillers))
    assert store.index.mode == "hnsw" and store.index.approx_count >= 40
    for key in ("lr", "oom", "leak", "ens"):
        assert store.read(QUERIES[key], k=5)[0].record.tags == (key,)
    hits = store.read(QUERIES["lr"], k=3, tags=["filler"])
    assert hits and all(h.record.tags == ("filler",) for h in hits)

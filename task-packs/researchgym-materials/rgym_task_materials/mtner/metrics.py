"""Chunk-level NER scores, with CoNLL-2000 ``conlleval`` semantics.

A chunk is a maximal run ``B-X I-X ... I-X``; an ``I-X`` that does not continue
a chunk of type ``X`` starts a new one (as ``conlleval`` does).  A predicted
chunk counts as correct when its start, end and type equal a gold chunk's.

``micro_f1`` is the F1 over all chunks; ``macro_f1`` the mean of the per-type
F1 over the evaluated types (a type with neither gold nor predicted chunks
scores 0, as the repository's ``ner.py`` does).  All figures are percentages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Chunk = tuple[int, int, str]


def chunks(tags: Sequence[str]) -> set[Chunk]:
    """The chunks of one tag sequence as ``(start, end_exclusive, type)``."""
    out: set[Chunk] = set()
    start, kind = -1, ""
    for i, tag in enumerate(tags):
        prefix, label = (tag[0], tag[2:]) if tag != "O" else ("O", "")
        if start >= 0 and (prefix in ("O", "B") or label != kind):
            out.add((start, i, kind))
            start, kind = -1, ""
        if prefix in ("B", "I") and start < 0:
            start, kind = i, label
    if start >= 0:
        out.add((start, len(tags), kind))
    return out


def _f1(correct: int, guessed: int, gold: int) -> tuple[float, float, float]:
    precision = correct / guessed if guessed else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return 100 * precision, 100 * recall, 100 * f1


def score(gold: Iterable[Sequence[str]], predicted: Iterable[Sequence[str]],
          types: Sequence[str]) -> dict[str, Any]:
    """Micro and macro F1 of ``predicted`` against ``gold`` (sentence by sentence)."""
    correct: dict[str, int] = {}
    guessed: dict[str, int] = {}
    total: dict[str, int] = {}
    n = 0
    for gold_tags, pred_tags in zip(gold, predicted, strict=True):
        if len(gold_tags) != len(pred_tags):
            raise ValueError(f"sentence {n}: {len(pred_tags)} predicted tags for {len(gold_tags)} words")
        g, p = chunks(gold_tags), chunks(pred_tags)
        for _, _, kind in g:
            total[kind] = total.get(kind, 0) + 1
        for _, _, kind in p:
            guessed[kind] = guessed.get(kind, 0) + 1
        for _, _, kind in g & p:
            correct[kind] = correct.get(kind, 0) + 1
        n += 1
    per_type: dict[str, dict[str, float]] = {}
    for kind in types:
        precision, recall, f1 = _f1(correct.get(kind, 0), guessed.get(kind, 0), total.get(kind, 0))
        per_type[kind] = {"precision": precision, "recall": recall, "f1": f1,
                          "gold": total.get(kind, 0), "predicted": guessed.get(kind, 0)}
    _, _, micro = _f1(sum(correct.values()), sum(guessed.values()), sum(total.values()))
    macro = sum(v["f1"] for v in per_type.values()) / len(types) if types else 0.0
    return {"micro_f1": micro, "macro_f1": macro, "per_type": per_type, "sentences": n}

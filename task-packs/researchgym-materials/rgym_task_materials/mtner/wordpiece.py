"""A deterministic WordPiece vocabulary trainer (the baseline's tokenizer).

``tokenizers``' trainer breaks ties between equally frequent merges in hash
order, so two runs on the same text can yield different vocabularies; a
benchmark baseline has to be reproducible.  This trainer follows the same
algorithm (the one behind BERT's and SciBERT's vocabularies as trained by
``tokenizers``: byte-pair-style merges of the most frequent adjacent pieces,
continuation pieces written ``##x``) and breaks ties by the pieces' text.

It works on *word weights*, so a method can reweight words before training
(MATTER raises the frequency of words a detector marks as material concepts)::

    counts = count_words(lines)                  # {word: frequency}
    counts = {w: c + bonus(w) for w, c in counts.items()}
    vocab = train_wordpiece(counts, size=8000)

Words are split as BERT's uncased pipeline splits them (:func:`pre_tokenize`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .vocab import SPECIAL_TOKENS

PREFIX = "##"


def pre_tokenize(text: str) -> list[str]:
    """BERT's uncased normalisation and splitting (whitespace, punctuation)."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = _NORMALIZER.get("n")
    if normalizer is None:
        normalizer = _NORMALIZER["n"] = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
        _NORMALIZER["p"] = pre_tokenizers.BertPreTokenizer()
    return [w for w, _ in _NORMALIZER["p"].pre_tokenize_str(normalizer.normalize_str(text))]


_NORMALIZER: dict[str, Any] = {}


def count_words(lines: Iterable[str]) -> Counter[str]:
    """How often each (pre-tokenized) word occurs in ``lines``."""
    chunks: Counter[str] = Counter()
    for line in lines:
        chunks.update(line.split())
    counts: Counter[str] = Counter()
    for chunk in sorted(chunks):  # each distinct chunk is normalised and split once
        for word in pre_tokenize(chunk):
            counts[word] += chunks[chunk]
    return counts


def train_wordpiece(word_weights: Mapping[str, float], size: int, *, min_frequency: float = 2.0,
                    limit_alphabet: int = 1000, max_word_chars: int = 100) -> list[str]:
    """A vocabulary of at most ``size`` tokens: the special tokens, the alphabet (each
    character as a word start and as ``##`` continuation), then merged pieces in the
    order they were learnt.  Merges stop when no pair of pieces occurs ``min_frequency``
    times (weighted)."""
    words = {w: float(c) for w, c in word_weights.items() if w and len(w) <= max_word_chars and c > 0}
    char_weight: dict[str, float] = {}
    for word, weight in words.items():
        for char in word:
            char_weight[char] = char_weight.get(char, 0.0) + weight
    alphabet = sorted(char_weight, key=lambda c: (-char_weight[c], c))[:limit_alphabet]
    allowed = set(alphabet)
    vocab: list[str] = list(SPECIAL_TOKENS)
    seen = set(vocab)

    def add(token: str) -> None:
        if token not in seen:
            seen.add(token)
            vocab.append(token)

    for char in sorted(allowed):
        add(char)
    for char in sorted(allowed):
        add(PREFIX + char)
    if len(vocab) >= size:
        return vocab[:size]

    # every word as a list of pieces; words with characters outside the alphabet are left out
    entries = sorted((w, c) for w, c in words.items() if set(w) <= allowed)
    pieces = [[w[0], *(PREFIX + ch for ch in w[1:])] for w, _ in entries]
    weights = [c for _, c in entries]
    pair_weight: dict[tuple[str, str], float] = {}
    where: dict[tuple[str, str], set[int]] = {}
    for index, symbols in enumerate(pieces):
        for pair in zip(symbols, symbols[1:], strict=False):
            pair_weight[pair] = pair_weight.get(pair, 0.0) + weights[index]
            where.setdefault(pair, set()).add(index)
    heap = [(-w, pair) for pair, w in pair_weight.items()]
    heapq.heapify(heap)

    while len(vocab) < size and heap:
        neg, pair = heapq.heappop(heap)
        current = pair_weight.get(pair, 0.0)
        if current <= 0 or -neg != current:
            if current > 0:
                heapq.heappush(heap, (-current, pair))
            continue
        if current < min_frequency:
            break
        left, right = pair
        merged = left + right[len(PREFIX):]
        add(merged)
        grown: set[tuple[str, str]] = set()
        for index in sorted(where.pop(pair, ())):
            symbols = pieces[index]
            weight = weights[index]
            i, out = 0, []
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            for old in zip(symbols, symbols[1:], strict=False):
                pair_weight[old] -= weight
                if old != pair:
                    where.get(old, set()).discard(index)
            for new in zip(out, out[1:], strict=False):
                pair_weight[new] = pair_weight.get(new, 0.0) + weight
                grown.add(new)
                where.setdefault(new, set()).add(index)
            pieces[index] = out
        pair_weight.pop(pair, None)
        # a pair whose weight grew needs a fresh heap entry; one whose weight fell is
        # pushed again with its current weight when its stale entry comes up
        for other in sorted(grown):
            value = pair_weight.get(other, 0.0)
            if other != pair and value > 0:
                heapq.heappush(heap, (-value, other))
    return vocab

"""Text normalisation of the materials-tokenization task (MatSciBERT's convention).

Every word is first cleaned the way BERT's normaliser does (control characters
removed, accents stripped, CJK characters spaced; case kept), then each character
is replaced by its entry in the repository's ``code/vocab_mappings.txt`` (one
``<char> <replacement>`` per line: ``℃`` -> ``°C``, ``½`` -> ``1/2``...).
Characters without an entry become a space, so odd symbols never reach the
vocabulary.  Lower-casing is the tokenizer's job (the task's BERT is uncased).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def read_mappings(path: Path) -> dict[str, str]:
    """``vocab_mappings.txt`` as ``{char: replacement}``."""
    mappings: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if len(line) >= 3 and line[1] == " ":
            mappings[line[0]] = line[2:]
    if not mappings:
        raise ValueError(f"{path}: no '<char> <replacement>' lines")
    return mappings


class Normalizer:
    """Normalises words and texts with the task's character mappings."""

    def __init__(self, mappings: dict[str, str]) -> None:
        from tokenizers.normalizers import BertNormalizer

        self.mappings = dict(mappings)
        self._bert = BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                    strip_accents=True, lowercase=False)
        self._cache: dict[str, str] = {}
        self._table: dict[int, str] = {ord(k): v for k, v in self.mappings.items()}

    @classmethod
    def from_file(cls, path: Path) -> Normalizer:
        return cls(read_mappings(path))

    def text(self, text: str) -> str:
        """A normalised copy of ``text`` (every whitespace character becomes a space)."""
        cleaned = self._bert.normalize_str(text)
        for char in set(cleaned):  # characters without a mapping become spaces
            self._table.setdefault(ord(char), " ")
        return cleaned.translate(self._table)

    def word(self, word: str) -> str:
        """A normalised word: may contain spaces (then the tokenizer splits it) or be empty."""
        cached = self._cache.get(word)
        if cached is None:
            cached = self._cache[word] = self.text(word).strip()
        return cached

    def words(self, words: Iterable[str]) -> list[str]:
        return [self.word(w) for w in words]

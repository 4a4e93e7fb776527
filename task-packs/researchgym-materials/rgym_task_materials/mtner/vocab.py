"""The agent's vocabulary (``vocab.txt``) and the WordPiece tokenizer built from it.

The task's submission is a BERT WordPiece vocabulary: one token per line, the
line number is the token id, continuation pieces start with ``##``.  It must
hold the five special tokens and at most the profile's number of tokens.  The
grader tokenizes with exactly BERT's uncased pipeline (clean text, strip
accents, lower case, split on whitespace and punctuation, greedy longest-match
WordPiece, ``[UNK]`` for a word it cannot cover), so the vocabulary is the only
thing a method changes.
"""

from __future__ import annotations

from collections.abc import Sequence

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_TOKEN_CHARS = 100


class VocabError(ValueError):
    """The vocabulary file is unusable; the message says what to fix."""


def parse_vocab(data: bytes, *, max_size: int, where: str = "vocab.txt") -> list[str]:
    """Check and parse a ``vocab.txt``; raises :class:`VocabError` naming the problem."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VocabError(f"{where}: not UTF-8 ({exc})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        token = raw.rstrip("\r")
        if not token:
            raise VocabError(f"{where}:{number}: empty line; write one token per line")
        if any(c.isspace() for c in token):
            raise VocabError(f"{where}:{number}: token {token[:40]!r} contains whitespace")
        if len(token) > MAX_TOKEN_CHARS:
            raise VocabError(f"{where}:{number}: token longer than {MAX_TOKEN_CHARS} characters")
        if token in seen:
            raise VocabError(f"{where}:{number}: token {token[:40]!r} repeats line {seen[token]}")
        seen[token] = number
        tokens.append(token)
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise VocabError(f"{where}: the special token(s) {', '.join(missing)} are missing")
    if len(tokens) > max_size:
        raise VocabError(f"{where}: {len(tokens)} tokens; this profile allows at most {max_size}")
    return tokens


class WordPieceEncoder:
    """Encodes pre-split words with a vocabulary, keeping the word of every piece."""

    def __init__(self, tokens: Sequence[str], *, max_len: int) -> None:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

        self.tokens = list(tokens)
        vocab = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id, self.unk_id = vocab["[PAD]"], vocab["[UNK]"]
        self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]
        self.max_len = max_len
        tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]",
                                               max_input_chars_per_word=MAX_TOKEN_CHARS))
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        self._tokenizer = tokenizer

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int], int]:
        """``(ids, first_piece, pieces)``: ``[CLS] pieces [SEP]`` cut to ``max_len``,
        the position of each word's first piece (``-1`` when the word has no piece or was
        cut off) and the number of pieces before cutting."""
        first = [-1] * len(words)
        if not words:
            return [self.cls_id, self.sep_id], first, 0
        enc = self._tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        ids = enc.ids
        room = self.max_len - 2
        for position, word in enumerate(enc.word_ids):
            if word is not None and position < room and first[word] < 0:
                first[word] = position + 1
        return [self.cls_id, *ids[:room], self.sep_id], first, len(ids)

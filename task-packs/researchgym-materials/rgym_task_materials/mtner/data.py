"""Readers of the task's NER corpora, in the formats the ResearchGym repository ships.

* **SOFC-Exp** (``eval/classification/ner/datasets/sofc-exp-corpus``): documents in
  ``texts/NN_<doc>.txt``; per document, ``annotations/sentences/<doc>.csv`` (sentence
  id, experiment flag, begin, end) and ``annotations/entity_types_and_slots/<doc>.csv``
  (sentence id, token id, begin and end inside the sentence, entity tag, slot tag) for
  the experiment sentences; ``SOFC-Exp-Metadata.csv`` assigns each document to
  ``train``, ``dev`` or ``test``.  ``sofc`` uses the entity tags (MATERIAL, VALUE,
  DEVICE, EXPERIMENT), ``sofc_slot`` (slot filling, "SF") the slot tags.
* **MatScholar** (``NER_MATSCHOLAR/{train,dev,test}.txt``): CoNLL, ``word TAG`` per
  line, sentences separated by blank lines.

Folds (rgym's definition, the repository's ``ner_datasets.py`` being absent): the
``train`` and ``dev`` documents of SOFC-Exp, sorted by name, are dealt round-robin
into five groups; fold *k* validates on group *k* and trains on the four others.
Without a fold the metadata's own ``train``/``dev`` split is used.  The ``test``
documents are always the test set.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Sentence = tuple[list[str], list[str]]  # words, IOB2 tags
SOFC_CORPUS = "eval/classification/ner/datasets/sofc-exp-corpus"
MATSCHOLAR = "eval/classification/ner/datasets/NER_MATSCHOLAR"
FOLDS = 5
#: Slot-filling tags that ResearchGym's evaluation scores as ``O``.
SLOT_IGNORED = "experiment_evoking_word"


def read_conll(path: Path) -> list[Sentence]:
    """A CoNLL file (``word TAG`` lines, blank lines between sentences)."""
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            if not line.strip():
                if words:
                    sentences.append((words, tags))
                    words, tags = [], []
                continue
            word, sep, tag = line.rpartition(" ")  # a word may hold spaces, or be empty
            if sep and tag == "":
                tag = "O"  # 32 lines of MatScholar's dev.txt carry no tag: read them as O
            if not sep or not _is_tag(tag):
                raise ValueError(f"{path}:{number}: expected 'word TAG', got {line!r}")
            words.append(word)
            tags.append(tag)
    if words:
        sentences.append((words, tags))
    return sentences


def _is_tag(tag: str) -> bool:
    return tag == "O" or (len(tag) > 2 and tag[:2] in ("B-", "I-"))


def sofc_sets(corpus: Path) -> dict[str, str]:
    """``{document: "train" | "dev" | "test"}`` from ``SOFC-Exp-Metadata.csv``."""
    out: dict[str, str] = {}
    path = corpus / "SOFC-Exp-Metadata.csv"
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        for row in reader:
            name, split = (row.get("name") or "").strip(), (row.get("set") or "").strip()
            if name and split in ("train", "dev", "test"):
                out[name] = split
    if not out:
        raise ValueError(f"{path}: no document with a 'set' of train, dev or test")
    return out


def _rows(path: Path) -> Iterator[list[str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if row and any(cell.strip() for cell in row):
                yield row


def read_sofc_document(corpus: Path, doc: str) -> list[tuple[list[str], list[str], list[str]]]:
    """The annotated (experiment) sentences of one SOFC-Exp document, as
    ``(words, entity tags, slot tags)``."""
    texts = sorted((corpus / "texts").glob(f"*_{doc}.txt"))
    if len(texts) != 1:
        raise ValueError(f"{corpus / 'texts'}: expected one text file for {doc}, found {len(texts)}")
    text = texts[0].read_text(encoding="utf-8")
    sentence_file = corpus / "annotations" / "sentences" / f"{doc}.csv"
    bounds = {int(r[0]): int(r[2]) for r in _rows(sentence_file)}
    sentences: dict[int, tuple[list[str], list[str], list[str]]] = {}
    token_file = corpus / "annotations" / "entity_types_and_slots" / f"{doc}.csv"
    for number, row in enumerate(_rows(token_file), 1):
        if len(row) < 6 or not (_is_tag(row[4]) and _is_tag(row[5])):
            raise ValueError(f"{token_file}:{number}: expected 6 tab-separated fields with IOB tags")
        sent, begin, end = int(row[0]), int(row[2]), int(row[3])
        if sent not in bounds:
            raise ValueError(f"{token_file}:{number}: sentence {sent} is not in {sentence_file}")
        start = bounds[sent]
        words, entities, slots = sentences.setdefault(sent, ([], [], []))
        words.append(text[start + begin:start + end])
        entities.append(row[4])
        slots.append(row[5])
    return [sentences[k] for k in sorted(sentences)]


def sofc_fold(sets: dict[str, str], fold: int | None) -> tuple[list[str], list[str], list[str]]:
    """Document names of (train, validation, test) for ``fold`` (1..5) or the official split."""
    test = sorted(d for d, s in sets.items() if s == "test")
    if fold is None:
        return (sorted(d for d, s in sets.items() if s == "train"),
                sorted(d for d, s in sets.items() if s == "dev"), test)
    if not 1 <= fold <= FOLDS:
        raise ValueError(f"fold must be 1..{FOLDS}, got {fold}")
    pool = sorted(d for d, s in sets.items() if s in ("train", "dev"))
    val = [d for i, d in enumerate(pool) if i % FOLDS == fold - 1]
    train = [d for i, d in enumerate(pool) if i % FOLDS != fold - 1]
    return train, val, test


def entity_types(sentences: Iterable[Sentence], ignored: Iterable[str] = ()) -> list[str]:
    """The entity types of ``sentences`` (tags without ``B-``/``I-``), sorted."""
    skip = set(ignored)
    return sorted({t[2:] for _, tags in sentences for t in tags if t != "O" and t[2:] not in skip})


def blank_ignored(sentences: list[Sentence], ignored: Iterable[str]) -> list[Sentence]:
    """``sentences`` with the tags of the ``ignored`` types replaced by ``O``."""
    skip = set(ignored)
    if not skip:
        return sentences
    return [(words, [("O" if t != "O" and t[2:] in skip else t) for t in tags])
            for words, tags in sentences]


def read_corpus(task_dir: Path, *, with_test: bool = True) -> dict[str, Any]:
    """The NER corpora of a task directory as plain JSON data::

        {"sofc": {"sets": {doc: split}, "documents": {doc: [[words, entity tags, slot tags], ...]}},
         "matscholar": {"train": [[words, tags], ...], "dev": [...], "test": [...]}}

    ``with_test=False`` leaves the test documents and ``test.txt`` out (the agent's
    workspace does not hold them).
    """
    corpus = task_dir / SOFC_CORPUS
    sets = sofc_sets(corpus)
    documents = {doc: [list(s) for s in read_sofc_document(corpus, doc)]
                 for doc, split in sorted(sets.items()) if with_test or split != "test"}
    matscholar = {split: [list(s) for s in read_conll(task_dir / MATSCHOLAR / f"{split}.txt")]
                  for split in ("train", "dev", *(("test",) if with_test else ()))}
    return {"sofc": {"sets": sets, "documents": documents}, "matscholar": matscholar}

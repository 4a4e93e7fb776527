"""The baseline tokenizer: WordPiece (the algorithm of BERT and SciBERT) trained on the
text of this workspace, written to ``vocab.txt``.

    python rgym_baseline.py [--size N] [--out vocab.txt]

The corpus: the SOFC-Exp texts, MatScholar's train/dev sentences, the
relation-classification documents and the glass/non-glass abstracts left in the
workspace (no test document), normalised as the grader normalises words
(``rgym_mtner.normalize``).  ``--size`` defaults to the profile's vocabulary limit
(``RGYM_PROFILE``: cpu 8,000; researchgym 31,090, the paper's size).  The trainer
is ``rgym_mtner.wordpiece`` (deterministic; it takes word weights, so a method can
reweight words before training).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rgym_mtner.data import MATSCHOLAR, SOFC_CORPUS, read_conll  # noqa: E402
from rgym_mtner.normalize import Normalizer  # noqa: E402
from rgym_mtner.profiles import get_profile  # noqa: E402
from rgym_mtner.wordpiece import count_words, train_wordpiece  # noqa: E402

RC_DATA = "eval/classification/relation_classification/datasets/datasets/data"
GLASS = "eval/classification/cls/datasets/glass_non_glass"


def corpus_lines(root: Path, normalizer: Normalizer) -> Iterator[str]:
    """The workspace's text, one normalised line at a time, in a fixed order."""
    for path in sorted((root / SOFC_CORPUS / "texts").glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield normalizer.text(line)
    for split in ("train", "dev"):
        path = root / MATSCHOLAR / f"{split}.txt"
        if path.is_file():
            for words, _ in read_conll(path):
                yield " ".join(normalizer.words(words))
    for path in sorted((root / RC_DATA).glob("*.txt")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                yield normalizer.text(line)
    for split in ("train", "val"):
        path = root / GLASS / f"{split}.csv"
        if path.is_file():
            with path.open(encoding="utf-8", errors="replace", newline="") as fh:
                for row in csv.DictReader(fh):
                    if row.get("Abstract"):
                        yield normalizer.text(row["Abstract"])


def main() -> None:
    profile = get_profile(os.environ.get("RGYM_PROFILE"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=profile.vocab_max)
    parser.add_argument("--out", type=Path, default=HERE / "vocab.txt")
    args = parser.parse_args()
    normalizer = Normalizer.from_file(HERE / "code" / "vocab_mappings.txt")
    vocab = train_wordpiece(count_words(corpus_lines(HERE, normalizer)), args.size)
    args.out.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(vocab)} tokens, WordPiece on the workspace's text)")


if __name__ == "__main__":
    main()

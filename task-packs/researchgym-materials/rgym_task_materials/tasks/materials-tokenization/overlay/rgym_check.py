"""Your vocabulary on the development split: the grader's evaluation, without test data.

    python rgym_check.py [--vocab vocab.txt] [--checkpoint checkpoint/model.safetensors]

Runs the profile's downstream evaluation (``RGYM_PROFILE``; the code in
``rgym_mtner/`` is a copy of the grader's) in this process, with the validation
split standing in for the test split, and prints the scores and how finely your
vocabulary cuts words (pieces per word, per entity word).  The grader runs the same
code on test documents you do not have; its scores will differ from these.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rgym_mtner.data import read_corpus  # noqa: E402
from rgym_mtner.jobs import aggregate, build_job  # noqa: E402
from rgym_mtner.normalize import Normalizer  # noqa: E402
from rgym_mtner.profiles import get_profile  # noqa: E402
from rgym_mtner.vocab import parse_vocab  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=Path, default=HERE / "vocab.txt")
    parser.add_argument("--checkpoint", type=Path, default=HERE / "checkpoint" / "model.safetensors")
    parser.add_argument("--profile", default=os.environ.get("RGYM_PROFILE"))
    args = parser.parse_args()
    profile = get_profile(args.profile)
    if not args.vocab.is_file():
        sys.exit(f"{args.vocab} is missing: `python rgym_baseline.py` writes the baseline's")
    vocab = parse_vocab(args.vocab.read_bytes(), max_size=profile.vocab_max, where=str(args.vocab))
    state = None
    if args.checkpoint.is_file():
        from safetensors.torch import load_file

        state = load_file(str(args.checkpoint))
    elif profile.checkpoint == "required":
        sys.exit(f"{args.checkpoint} is missing: the {profile.name} profile fine-tunes your checkpoint")
    corpus = read_corpus(HERE, with_test=False)
    normalizer = Normalizer.from_file(HERE / "code" / "vocab_mappings.txt")
    job, gold = build_job(profile, corpus, vocab, normalizer, evaluate_on="val")
    from rgym_mtner.train import run_job

    started = time.monotonic()
    result = run_job(job, state, log=lambda m: print(m, flush=True))
    out = aggregate(profile, job, result, gold)
    print(json.dumps({"profile": profile.name, "vocab_size": len(vocab),
                      "dev_scores": out["scores"], "fragmentation": result["fragmentation"],
                      "seconds": round(time.monotonic() - started, 1)}, indent=2))


if __name__ == "__main__":
    main()

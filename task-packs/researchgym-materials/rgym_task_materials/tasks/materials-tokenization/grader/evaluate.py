"""Grader of researchgym/materials-tokenization: runs the downstream evaluation itself.

1. The submission is the agent's vocabulary, ``vocab.txt`` at the workspace root
   (the repository's convention), and optionally an encoder checkpoint,
   ``checkpoint/model.safetensors`` (required in the ``researchgym`` profile).
   Nothing else of the workspace reaches this grader.
2. The vocabulary is checked here (special tokens, size limit of the profile).
3. The job (``rgym_mtner.jobs.build_job``): the grader's own copy of the NER
   corpora (``private/.researchgym/mt_corpus.json``, built from the verified
   repository, test documents included), normalised with the grader's copy of
   ``vocab_mappings.txt``; the profile's folds, seeds and learning rates.  The test
   tags are never part of it.
4. The fine-tuning runs in a confined worker (``rgym_confined.run_python``,
   without the submission's files: only the job, the vocabulary and the
   checkpoint, whose ``safetensors`` bytes are parsed there), with the grader's
   copy of the evaluation code (``rgym_mtner``).  It returns predicted tags.
5. This process scores them against the private test tags (conlleval chunk F1)
   and picks the learning rate on validation, as ``ner.py`` does.

Result files, logs, pickles and tables the agent writes (``grading/runs/``,
``task_description.md``...) are never read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rgym_confined import run_python  # noqa: E402
from rgym_confined import write_result as write  # noqa: E402
from rgym_mtner.jobs import aggregate, build_job  # noqa: E402
from rgym_mtner.normalize import Normalizer  # noqa: E402
from rgym_mtner.profiles import get_profile  # noqa: E402
from rgym_mtner.vocab import VocabError, parse_vocab  # noqa: E402

VOCAB = "vocab.txt"
CHECKPOINT = "checkpoint/model.safetensors"
DATASET_MOUNT = ".researchgym"


def _submission_file(submission: Path, rel: str, max_bytes: int) -> bytes | None:
    """The bytes of a regular file of the submission (no link on the way), or ``None``."""
    path = submission
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise ValueError(f"{rel} is a symbolic link; submit a regular file")
    if not path.exists():
        return None
    if not path.is_file():
        raise ValueError(f"{rel} is not a regular file")
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{rel} is {size >> 20} MiB; this profile allows at most {max_bytes >> 20} MiB")
    return path.read_bytes()


def main() -> None:
    submission = Path(os.environ["RGYM_SUBMISSION_DIR"])
    private = Path(os.environ["RGYM_PRIVATE_DIR"]) / DATASET_MOUNT
    profile = get_profile(os.environ.get("RGYM_PROFILE"))
    try:
        raw_vocab = _submission_file(submission, VOCAB, 16 << 20)
        raw_checkpoint_present = _submission_file(submission, CHECKPOINT, profile.checkpoint_max_mb << 20) is not None
    except ValueError as exc:
        write({"error": str(exc)})
        return
    if raw_vocab is None:
        write({"error": f"{VOCAB} is missing: write your tokenizer's WordPiece vocabulary there (one "
                        f"token per line; `python rgym_baseline.py` writes the baseline's)",
               "missing_submission": True})
        return
    if profile.checkpoint == "required" and not raw_checkpoint_present:
        write({"error": f"{CHECKPOINT} is missing: the {profile.name} profile fine-tunes your "
                        f"pretrained encoder (a BertModel or BertForMaskedLM state dict in safetensors "
                        f"format, {profile.architecture['num_hidden_layers']} layers of size "
                        f"{profile.architecture['hidden_size']}, your vocabulary's size)",
               "missing_submission": True})
        return
    try:
        vocab = parse_vocab(raw_vocab, max_size=profile.vocab_max, where=VOCAB)
    except VocabError as exc:
        write({"error": str(exc)})
        return

    corpus = json.loads((private / "mt_corpus.json").read_text(encoding="utf-8"))
    normalizer = Normalizer.from_file(private / "vocab_mappings.txt")
    job, gold = build_job(profile, corpus, vocab, normalizer, evaluate_on="test")
    files: dict[str, Path | bytes] = {"mt_driver.py": HERE / "mt_driver.py",
                                      "job.json": json.dumps(job).encode()}
    for module in sorted((HERE / "rgym_mtner").glob("*.py")):
        files[f"rgym_mtner/{module.name}"] = module
    if raw_checkpoint_present:
        files["model.safetensors"] = submission / CHECKPOINT
    outcome = run_python(submission, "mt_driver.py", files, ["predictions.json"],
                         wall_s=profile.worker_wall_s, memory_mb=profile.worker_memory_mb, pids=256,
                         with_submission=False)
    problem = outcome.failure("the downstream evaluation of your vocabulary")
    if problem:
        write({"error": problem})
        return
    raw = outcome.files.get("predictions.json")
    if raw is None:
        write({"error": "the downstream evaluation returned no predictions"})
        return
    result = json.loads(raw)
    if "error" in result:  # a checkpoint that does not fit, reported by the worker
        write({"error": str(result["error"])})
        return
    out = aggregate(profile, job, result, gold)
    write({"scores": out["scores"], "subtasks": out["subtasks"],
           "details": {"profile": profile.name, "vocab_size": len(vocab),
                       "checkpoint": raw_checkpoint_present, "confined": outcome.confined,
                       "fragmentation": result.get("fragmentation"), **out["details"]}})


if __name__ == "__main__":
    main()

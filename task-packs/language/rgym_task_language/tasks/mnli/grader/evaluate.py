"""Hidden grader of mlgym/mnli: accuracy (percent) of the submitted model on
MultiNLI's validation-matched pairs, against the private labels (all 9,815 in the
``mlgym`` profile; the first ``RGYM_MNLI_EVAL_PAIRS`` in the ``cpu`` profile).

The submitted ``bert_mnli_model/`` is loaded in a confined worker (rgym's grader
kit: another user, no network, no access to this folder or ``private/``) by the
grader's own driver ``mnli_predict.py``, which returns class logits for the
pairs this grader sends; the predictions (argmax) and the accuracy are computed
here, as MLGym's evaluate.py did (``validation_accuracy`` in percent).
"""

import csv
import io
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
from rgym_grader_kit import Limits, WorkerError, context, run_worker, write_error, write_scores

HERE = Path(__file__).resolve().parent
MODEL = "bert_mnli_model"
MAX_MODEL_MB = 4096
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    print(message, file=sys.stderr)
    sys.exit(0)


def read_labels(ctx):
    with (ctx.private("data") / "validation_matched_labels.csv").open(newline="") as fh:
        return [int(row["label"]) for row in csv.DictReader(fh)]


def read_pairs(ctx):
    lines = (ctx.data("data") / "validation_matched.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def check_submission(ctx):
    folder = ctx.submission_dir / MODEL
    if not (folder / "config.json").is_file() or folder.is_symlink():
        fail(f"{MODEL}/config.json not found in the workspace: save your model with "
             f"model.save_pretrained('{MODEL}') (and the tokenizer with "
             f"tokenizer.save_pretrained('{MODEL}')); `python baseline.py` writes one", missing=True)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    if size > MAX_MODEL_MB << 20:
        fail(f"{MODEL}/ holds {size / 2**20:.0f} MB; at most {MAX_MODEL_MB} MB are graded")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        fail(f"{MODEL}/config.json is not readable JSON ({exc})")
    if not isinstance(config, dict) or config.get("auto_map"):
        fail(f"{MODEL}/config.json asks for custom model code (auto_map); the grader loads only "
             f"architectures that transformers knows, without remote code")


def tokenizer_files(ctx):
    """pretrained/'s tokenizer, used when the submission has none."""
    pretrained = ctx.data("pretrained")
    return {f"rgym_tokenizer/{name}": pretrained / name for name in TOKENIZER_FILES
            if (pretrained / name).is_file()}


def main():
    ctx = context()
    labels = read_labels(ctx)
    pairs = read_pairs(ctx)
    if len(pairs) != len(labels):
        raise RuntimeError(f"grader data: {len(pairs)} pairs but {len(labels)} labels")
    check_submission(ctx)
    limit = int(os.environ.get("RGYM_MNLI_EVAL_PAIRS") or 0)  # the profile's subset (0: all)
    if limit and limit < len(pairs):
        pairs, labels = pairs[:limit], labels[:limit]
    inputs = "".join(json.dumps({"premise": p["premise"], "hypothesis": p["hypothesis"]}) + "\n"
                     for p in pairs).encode()
    threads = os.environ.get("RGYM_MNLI_GRADER_THREADS") or "1"
    files = {"mnli_predict.py": HERE / "mnli_predict.py", "rgym_inputs.jsonl": inputs,
             **tokenizer_files(ctx)}
    wall = float(os.environ.get("RGYM_MNLI_PREDICT_TIMEOUT_S") or 1500)
    try:
        res = run_worker(["python", "mnli_predict.py"], files=files, outputs=["rgym_logits.npy"],
                         env={"RGYM_MNLI_THREADS": threads, "OMP_NUM_THREADS": threads},
                         limits=Limits(wall_s=wall, memory_mb=8192, pids=256),
                         name=f"loading and running {MODEL}/")
    except WorkerError as exc:
        fail(str(exc))
    if res.timed_out:
        fail(f"predicting the {len(pairs)} validation pairs with {MODEL}/ took longer than "
             f"{wall:.0f} s")
    if not res.ok or "rgym_logits.npy" not in res.files:
        tail = (res.stderr_tail or "").strip().splitlines()[-6:]
        fail(f"{MODEL}/ could not be loaded or run by transformers' "
             f"AutoModelForSequenceClassification (exit code {res.exit_code}): "
             + (" | ".join(tail) or "no error output"))
    try:
        logits = np.load(io.BytesIO(res.files["rgym_logits.npy"]), allow_pickle=False)
    except ValueError as exc:
        raise RuntimeError(f"the prediction driver wrote an unreadable array ({exc})") from None
    if logits.ndim != 2 or logits.shape[0] != len(pairs) or logits.shape[1] != 3:
        fail(f"{MODEL}/ gives logits of shape {tuple(logits.shape)} for {len(pairs)} pairs; a "
             f"3-label classifier (0 entailment, 1 neutral, 2 contradiction) is expected: load "
             f"the pretrained model with num_labels=3")
    if not np.isfinite(logits).all():
        fail(f"{MODEL}/ gives NaN or infinite logits")
    predicted = logits.argmax(axis=1)
    truth = np.asarray(labels)
    accuracy = 100.0 * float((predicted == truth).mean())
    per_genre = {}
    for genre in sorted({p.get("genre", "") for p in pairs}):
        mask = np.array([p.get("genre", "") == genre for p in pairs])
        per_genre[genre] = round(100.0 * float((predicted[mask] == truth[mask]).mean()), 4)
    write_scores({"validation_accuracy": accuracy},
                 details={"pairs": len(pairs), "subset": bool(limit), "per_genre_accuracy": per_genre,
                          "predicted_label_counts": np.bincount(predicted, minlength=3).tolist(),
                          "confined": bool(ctx.confined)})
    print(json.dumps({"validation_accuracy": accuracy}))


main()

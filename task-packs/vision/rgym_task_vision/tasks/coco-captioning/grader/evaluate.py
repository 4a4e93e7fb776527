"""Hidden grader of mlgym/coco-captioning: BLEU of the submitted captions against
the private reference captions, computed here (standard library only).

Unlike MLGym's evaluate.py, which averaged a `bleu_score` column the agent's own
code wrote, the grader reads only the captions and computes word-level corpus
BLEU-4 (primary), BLEU-1 and MLGym's character-level mean (`char_bleu`) itself;
see bleu.py.
"""

import csv
import json
import os
import sys
from pathlib import Path

from bleu import scores, tokenize

MAX_BYTES = 16 * 1024 * 1024
MAX_CAPTION_CHARS = 2000


def report(values, details):
    Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps({"scores": values,
                                                                "details": details}))
    print(json.dumps(values))


def fail(message, missing=False):
    body = {"error": message}
    if missing:
        body["missing_submission"] = True
    Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps(body))
    print(message, file=sys.stderr)
    sys.exit(0)


def read_references():
    path = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data" / "test_references.jsonl"
    refs = {}
    with path.open() as fh:
        for line in fh:
            row = json.loads(line)
            refs[str(row["image_id"])] = [tokenize(c) for c in row["captions"]]
    return refs


def read_submission(path, refs):
    if path.is_symlink() or not path.is_file():
        fail("submission.csv not found in the workspace: write the columns image_id,caption "
             "with one row per image of data/test.jsonl; `python baseline.py` writes one",
             missing=not path.exists())
    if path.stat().st_size > MAX_BYTES:
        fail(f"submission.csv is {path.stat().st_size} bytes, more than {MAX_BYTES}: write one "
             f"short caption per test image")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(f"submission.csv is not UTF-8 text ({exc})")
    try:
        reader = csv.DictReader(text.splitlines(keepends=True))
        columns = [c.strip() for c in (reader.fieldnames or [])]
        if "image_id" not in columns or "caption" not in columns:
            fail(f"submission.csv must have a header with the columns image_id,caption; found "
                 f"{columns or 'none'}")
        reader.fieldnames = columns
        captions = {}
        for row in reader:
            line = reader.line_num
            image_id = (row.get("image_id") or "").strip()
            if image_id.endswith(".0"):
                image_id = image_id[:-2]
            caption = row.get("caption")
            if caption is None:
                fail(f"submission.csv line {line}: no caption for image {image_id!r}")
            if image_id not in refs:
                fail(f"submission.csv line {line}: image_id {image_id!r} is not a test image "
                     f"(see data/test.jsonl)")
            if image_id in captions:
                fail(f"submission.csv line {line}: image_id {image_id} appears twice")
            if len(caption) > MAX_CAPTION_CHARS:
                fail(f"submission.csv line {line}: the caption of image {image_id} has "
                     f"{len(caption)} characters (at most {MAX_CAPTION_CHARS})")
            captions[image_id] = caption
    except csv.Error as exc:
        fail(f"submission.csv is not a readable CSV ({exc})")
    missing = [k for k in refs if k not in captions]
    if missing:
        fail(f"submission.csv has no caption for {len(missing)} of the {len(refs)} test images "
             f"(first: image_id {missing[0]}); caption every image of data/test.jsonl")
    return captions


def main():
    refs = read_references()
    captions = read_submission(Path(os.environ["RGYM_SUBMISSION_DIR"]) / "submission.csv", refs)
    ids = sorted(refs)
    hypotheses = [tokenize(captions[i]) for i in ids]
    values = scores(hypotheses, [refs[i] for i in ids])
    empty = sum(1 for h in hypotheses if not h)
    report(values, {"n_test": len(ids), "empty_captions": empty,
                    "mean_caption_tokens": round(sum(map(len, hypotheses)) / len(ids), 3)})


main()

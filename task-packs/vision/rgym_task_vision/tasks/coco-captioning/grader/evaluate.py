"""Hidden grader of mlgym/coco-captioning: BLEU of the submitted captions against
the private reference captions, computed here (standard library only).

Unlike MLGym's evaluate.py, which averaged a `bleu_score` column the agent's own
code wrote, the grader reads only the captions and computes word-level corpus
BLEU-4 (primary), BLEU-1 and MLGym's character-level mean (`char_bleu`) itself;
see bleu.py.
"""

import csv
import json
import sys

from bleu import scores, tokenize
from rgym_grader_kit import context, read_submission_file, write_error, write_scores

MAX_BYTES = 16 * 1024 * 1024
MAX_CAPTION_CHARS = 2000


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    print(message, file=sys.stderr)
    sys.exit(0)


def read_references():
    refs = {}
    with (context().private("data") / "test_references.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            refs[str(row["image_id"])] = [tokenize(c) for c in row["captions"]]
    return refs


def read_submission(refs):
    try:
        text = read_submission_file("submission.csv", max_bytes=MAX_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        fail("submission.csv not found in the workspace: write the columns image_id,caption "
             "with one row per image of data/test.jsonl; `python baseline.py` writes one",
             missing=True)
    except UnicodeDecodeError as exc:
        fail(f"submission.csv is not UTF-8 text ({exc})")
    except ValueError as exc:  # a link, not a regular file, too large
        fail(f"submission.csv cannot be read: {exc}")
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
    captions = read_submission(refs)
    ids = sorted(refs)
    hypotheses = [tokenize(captions[i]) for i in ids]
    values = scores(hypotheses, [refs[i] for i in ids])
    empty = sum(1 for h in hypotheses if not h)
    write_scores(values, details={"n_test": len(ids), "empty_captions": empty,
                                  "mean_caption_tokens": round(sum(map(len, hypotheses)) / len(ids), 3)})
    print(json.dumps(values))


main()

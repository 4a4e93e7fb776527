"""Hidden grader of the image-classification tasks: accuracy of submission.csv
against the private test labels.  Standard library only.

The runner lays out the evaluation folder (``submission/``, ``private/<mount>/``)
and points ``RGYM_SCORES_FILE`` at the file this grader writes.  Writing scores
and errors goes through :func:`report` and :func:`fail`, the one place to switch
to the grader kit's helpers (``rgym_core.grader_protocol``) when they land.
"""

import csv
import json
import os
import sys
from pathlib import Path

MAX_BYTES = 16 * 1024 * 1024  # a 10,000-row submission is about 30 KB


def report(scores, details):
    Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps({"scores": scores,
                                                                "details": details}))
    print(json.dumps(scores))


def fail(message, missing=False):
    body = {"error": message}
    if missing:
        body["missing_submission"] = True
    Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps(body))
    print(message, file=sys.stderr)
    sys.exit(0)


def read_truth(mount="data"):
    path = Path(os.environ["RGYM_PRIVATE_DIR"]) / mount / "test_labels.csv"
    with path.open(newline="") as fh:
        return [int(row["label"]) for row in csv.DictReader(fh)]


def read_submission(path, n_test, n_classes):
    """The predicted labels, in test order, or a clear error naming the line."""
    if path.is_symlink() or not path.is_file():
        fail("submission.csv not found in the workspace: write one row per test image "
             "(data/test_images.npy, in order) with the column 'label'; `python baseline.py` "
             "writes one", missing=not path.exists())
    if path.stat().st_size > MAX_BYTES:
        fail(f"submission.csv is {path.stat().st_size} bytes; a submission of {n_test} labels "
             f"is far smaller: write one integer label per row")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(f"submission.csv is not UTF-8 text ({exc}); write a CSV with the column 'label'")
    reader = csv.DictReader(text.splitlines())
    columns = [c.strip() for c in (reader.fieldnames or [])]
    if "label" not in columns:
        fail(f"submission.csv must have a header with the column 'label' (one row per test "
             f"image, in order); found the columns {columns or 'none'}")
    reader.fieldnames = columns
    labels, ids = [], []
    for line, row in enumerate(reader, start=2):
        value = (row.get("label") or "").strip()
        try:
            number = float(value)
        except ValueError:
            fail(f"submission.csv line {line}: label {value!r} is not a number; labels are "
                 f"the class numbers 0-{n_classes - 1}")
        if number != int(number) or not 0 <= number < n_classes:
            fail(f"submission.csv line {line}: label {value!r} is not a class 0-{n_classes - 1}")
        labels.append(int(number))
        if "id" in columns:
            ids.append((row.get("id") or "").strip())
    if len(labels) != n_test:
        fail(f"submission.csv has {len(labels)} predictions but the test set has {n_test} "
             f"images: write one row per image of data/test_images.npy, in order")
    if ids:
        expected = [str(i) for i in range(n_test)]
        if ids != expected:
            bad = next(i for i, (a, b) in enumerate(zip(ids, expected)) if a != b)
            fail(f"submission.csv line {bad + 2}: id {ids[bad]!r} should be {bad}; the optional "
                 f"id column must count the test images 0, 1, 2... in order")
    return labels


def grade(n_classes=10, mount="data"):
    truth = read_truth(mount)
    submission = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "submission.csv"
    predicted = read_submission(submission, len(truth), n_classes)
    correct = [p == t for p, t in zip(predicted, truth)]
    per_class = {}
    for k in range(n_classes):
        hits = [c for c, t in zip(correct, truth) if t == k]
        if hits:
            per_class[str(k)] = round(sum(hits) / len(hits), 6)
    report({"accuracy": sum(correct) / len(truth)},
           {"n_test": len(truth), "per_class_accuracy": per_class})

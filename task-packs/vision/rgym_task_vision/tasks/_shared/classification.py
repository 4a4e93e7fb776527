"""Hidden grader of the image-classification tasks: accuracy of submission.csv
against the private test labels.  Standard library and rgym's grader kit only
(no agent code runs: the submission is a CSV file).
"""

import csv
import math
import sys

from rgym_grader_kit import context, read_submission_file, write_error, write_scores

MAX_BYTES = 16 * 1024 * 1024  # a 10,000-row submission is about 30 KB


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    print(message, file=sys.stderr)
    sys.exit(0)


def read_truth(mount="data"):
    with (context().private(mount) / "test_labels.csv").open(newline="") as fh:
        return [int(row["label"]) for row in csv.DictReader(fh)]


def read_submission(n_test, n_classes):
    """The predicted labels, in test order, or a clear error naming the line."""
    try:
        return _parse(_read_text(), n_test, n_classes)
    except csv.Error as exc:
        fail(f"submission.csv is not a readable CSV file ({exc})")


def _read_text():
    try:
        text = read_submission_file("submission.csv", max_bytes=MAX_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        fail("submission.csv not found in the workspace: write one row per test image "
             "(data/test_images.npy, in order) with the column 'label'; `python baseline.py` "
             "writes one", missing=True)
    except UnicodeDecodeError as exc:
        fail(f"submission.csv is not UTF-8 text ({exc}); write a CSV with the column 'label'")
    except ValueError as exc:  # a link, not a regular file, too large
        fail(f"submission.csv cannot be read: {exc}")
    return text


def _parse(text, n_test, n_classes):
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
        if not math.isfinite(number) or number != int(number) or not 0 <= number < n_classes:
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
            bad = next(i for i, (a, b) in enumerate(zip(ids, expected, strict=True)) if a != b)
            fail(f"submission.csv line {bad + 2}: id {ids[bad]!r} should be {bad}; the optional "
                 f"id column must count the test images 0, 1, 2... in order")
    return labels


def grade(n_classes=10, mount="data"):
    truth = read_truth(mount)
    predicted = read_submission(len(truth), n_classes)
    correct = [p == t for p, t in zip(predicted, truth, strict=True)]
    per_class = {}
    for k in range(n_classes):
        hits = [c for c, t in zip(correct, truth, strict=True) if t == k]
        if hits:
            per_class[str(k)] = round(sum(hits) / len(hits), 6)
    scores = {"accuracy": sum(correct) / len(truth)}
    write_scores(scores, details={"n_test": len(truth), "per_class_accuracy": per_class})
    print(scores)

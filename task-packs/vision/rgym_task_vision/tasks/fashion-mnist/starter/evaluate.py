"""Check submission.csv before you validate (the test labels are hidden).

    python evaluate.py [submission.csv]

Checks what the grader checks, except the labels: a header with the column
`label`, one row per image of data/test_images.npy (in that order) and
integer classes 0-9. Prints the class counts. Use the `validate` tool for the
test accuracy.
"""

import csv
import json
import sys

import numpy as np

path = sys.argv[1] if len(sys.argv) > 1 else "submission.csv"
expected = len(np.load("data/test_images.npy", mmap_mode="r"))
with open(path, newline="") as fh:
    reader = csv.DictReader(fh)
    if "label" not in (reader.fieldnames or []):
        sys.exit(f"{path}: needs a header with the column 'label', found {reader.fieldnames}")
    labels = []
    for line, row in enumerate(reader, start=2):
        value = (row["label"] or "").strip()
        try:
            label = int(float(value))
        except ValueError:
            sys.exit(f"{path} line {line}: label {value!r} is not an integer")
        if not 0 <= label <= 9 or float(value) != label:
            sys.exit(f"{path} line {line}: label {value!r} is not a class 0-9")
        labels.append(label)
if len(labels) != expected:
    sys.exit(f"{path}: {len(labels)} predictions, but data/test_images.npy holds {expected} images")
counts = {str(k): labels.count(k) for k in range(10)}
print(json.dumps({"format": "ok", "predictions": len(labels), "class_counts": counts}))

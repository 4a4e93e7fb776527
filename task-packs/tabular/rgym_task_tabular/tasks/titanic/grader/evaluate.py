"""Hidden grader of mlgym/titanic: accuracy of submission.csv against the
private test labels.  Standard library only."""

import csv
import json
import os
import sys
from pathlib import Path

scores_file = Path(os.environ["RGYM_SCORES_FILE"])
submission = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "submission.csv"
answers = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data" / "ground_truth.csv"


def fail(message, missing=False):
    body = {"error": message}
    if missing:
        body["missing_submission"] = True
    scores_file.write_text(json.dumps(body))
    sys.exit(0)


def key(text):
    text = str(text).strip()
    return text[:-2] if text.endswith(".0") else text


if not submission.is_file():
    fail("submission.csv not found in the workspace: run `python baseline.py` or write it "
         "with the columns PassengerId,Survived and one row per row of data/test.csv",
         missing=True)
with answers.open(newline="") as fh:
    truth = {key(row["PassengerId"]): int(row["Survived"]) for row in csv.DictReader(fh)}

predicted = {}
with submission.open(newline="") as fh:
    reader = csv.DictReader(fh)
    columns = reader.fieldnames or []
    if "PassengerId" not in columns or "Survived" not in columns:
        fail(f"submission.csv must have the columns PassengerId,Survived; found {','.join(columns)}")
    for line, row in enumerate(reader, start=2):
        value = str(row["Survived"]).strip()
        if value not in ("0", "1", "0.0", "1.0"):
            fail(f"submission.csv line {line}: Survived must be 0 or 1, got {value!r}")
        predicted[key(row["PassengerId"])] = int(float(value))
missing = [k for k in truth if k not in predicted]
if missing:
    fail(f"submission.csv has no prediction for {len(missing)} of the {len(truth)} test "
         f"passengers (first: {missing[0]}); predict every row of data/test.csv")
correct = sum(predicted[k] == y for k, y in truth.items())
scores = {"accuracy": correct / len(truth)}
scores_file.write_text(json.dumps({"scores": scores, "details": {"n_test": len(truth)}}))
print(json.dumps(scores))

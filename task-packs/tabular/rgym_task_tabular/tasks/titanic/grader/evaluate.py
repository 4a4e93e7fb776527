"""Hidden grader of mlgym/titanic: accuracy of submission.csv against the
private test labels.  Standard library and the grader kit only."""

import csv
import io
import json
import sys

from rgym_grader_kit import context, read_submission_file, write_error, write_scores

ctx = context()
answers = ctx.private("data") / "ground_truth.csv"


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    sys.exit(0)


def key(text):
    text = str(text).strip()
    return text[:-2] if text.endswith(".0") else text


try:
    text = read_submission_file("submission.csv", max_bytes=50_000_000).decode("utf-8")
except (ValueError, UnicodeDecodeError) as exc:
    fail(f"submission.csv cannot be read: {exc}")
except FileNotFoundError:
    fail("submission.csv not found in the workspace: run `python baseline.py` or write it "
         "with the columns PassengerId,Survived and one row per row of data/test.csv",
         missing=True)
with answers.open(newline="") as fh:
    truth = {key(row["PassengerId"]): int(row["Survived"]) for row in csv.DictReader(fh)}

predicted = {}
reader = csv.DictReader(io.StringIO(text, newline=""))
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
write_scores(scores, details={"n_test": len(truth)})
print(json.dumps(scores))

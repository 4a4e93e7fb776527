"""Grader of rgym/demo: r2 and rmse of submission.csv against the hidden answers."""

import csv
import json
import math
import os
import sys
from pathlib import Path

scores_file = Path(os.environ["RGYM_SCORES_FILE"])
submission = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "submission.csv"
answers_file = Path(os.environ["RGYM_GRADER_DIR"]) / "answers.csv"


def fail(message, missing=False):
    scores_file.write_text(json.dumps({"error": message, "missing_submission": missing}))
    sys.exit(0)


if not submission.is_file():
    fail("submission.csv not found in the workspace: run `python baseline.py` or write it "
         "yourself (columns id,y)", missing=True)
with answers_file.open() as fh:
    answers = {r["id"]: float(r["y"]) for r in csv.DictReader(fh)}
try:
    with submission.open() as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or not {"id", "y"} <= set(reader.fieldnames):
            fail(f"submission.csv must have the columns id,y; found {reader.fieldnames}")
        predicted = {r["id"]: float(r["y"]) for r in reader}
except ValueError as exc:
    fail(f"submission.csv has a value that is not a number: {exc}")
missing = sorted(set(answers) - set(predicted), key=int)
if missing:
    fail(f"submission.csv lacks predictions for {len(missing)} ids (first: {missing[0]})")
errors = [predicted[k] - y for k, y in answers.items()]
mean = sum(answers.values()) / len(answers)
ss_res = sum(e * e for e in errors)
ss_tot = sum((y - mean) ** 2 for y in answers.values())
scores = {"r2": 1 - ss_res / ss_tot, "rmse": math.sqrt(ss_res / len(errors))}
scores_file.write_text(json.dumps({"scores": scores, "details": {"n": len(errors)}}))
print(json.dumps(scores))

"""Hidden grader of mlgym/house-price: r2 (primary) and rmse of submission.csv
against the private test prices.  Standard library only."""

import csv
import json
import math
import os
import sys
from pathlib import Path

scores_file = Path(os.environ["RGYM_SCORES_FILE"])
submission = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "submission.csv"
answers = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data" / "answer.csv"


def fail(message, missing=False):
    body = {"error": message}
    if missing:
        body["missing_submission"] = True
    scores_file.write_text(json.dumps(body))
    sys.exit(0)


if not submission.is_file():
    fail("submission.csv not found in the workspace: run `python baseline.py` or write it "
         "with the columns Id,SalePrice and one row per row of data/test.csv", missing=True)
with answers.open(newline="") as fh:
    truth = {row["Id"]: float(row["SalePrice"]) for row in csv.DictReader(fh)}

predicted = {}
with submission.open(newline="") as fh:
    reader = csv.DictReader(fh)
    columns = reader.fieldnames or []
    if "Id" not in columns or "SalePrice" not in columns:
        fail(f"submission.csv must have the columns Id,SalePrice; found {','.join(columns)}")
    for line, row in enumerate(reader, start=2):
        try:
            value = float(row["SalePrice"])
        except (TypeError, ValueError):
            fail(f"submission.csv line {line}: SalePrice {row['SalePrice']!r} is not a number")
        if not math.isfinite(value):
            fail(f"submission.csv line {line}: SalePrice {row['SalePrice']!r} is not finite")
        key = str(row["Id"]).strip()
        key = key[:-2] if key.endswith(".0") else key
        predicted[key] = value
missing = [k for k in truth if k not in predicted]
if missing:
    fail(f"submission.csv has no prediction for {len(missing)} of the {len(truth)} test Ids "
         f"(first: {missing[0]}); predict every row of data/test.csv")

mean = sum(truth.values()) / len(truth)
ss_res = sum((predicted[k] - y) ** 2 for k, y in truth.items())
ss_tot = sum((y - mean) ** 2 for y in truth.values())
scores = {"r2": 1 - ss_res / ss_tot, "rmse": math.sqrt(ss_res / len(truth))}
scores_file.write_text(json.dumps({"scores": scores, "details": {"n_test": len(truth)}}))
print(json.dumps(scores))

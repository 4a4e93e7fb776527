"""Hidden grader of mlgym/house-price: r2 (primary) and rmse of submission.csv
against the private test prices.  Standard library and the grader kit only."""

import csv
import io
import json
import math
import sys

from rgym_grader_kit import context, read_submission_file, write_error, write_scores

ctx = context()
answers = ctx.private("data") / "answer.csv"


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    sys.exit(0)


try:
    text = read_submission_file("submission.csv", max_bytes=50_000_000).decode("utf-8")
except (ValueError, UnicodeDecodeError) as exc:
    fail(f"submission.csv cannot be read: {exc}")
except FileNotFoundError:
    fail("submission.csv not found in the workspace: run `python baseline.py` or write it "
         "with the columns Id,SalePrice and one row per row of data/test.csv", missing=True)
with answers.open(newline="") as fh:
    truth = {row["Id"]: float(row["SalePrice"]) for row in csv.DictReader(fh)}

predicted = {}
reader = csv.DictReader(io.StringIO(text, newline=""))
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
write_scores(scores, details={"n_test": len(truth)})
print(json.dumps(scores))

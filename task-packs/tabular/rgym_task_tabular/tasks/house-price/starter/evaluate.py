"""Score predictions on the VALIDATION split (the test answers are hidden; use
the `validate` tool for the test score).

    python evaluate.py [validation_predictions.csv]

The file needs the columns Id,SalePrice with one row per row of
data/validation.csv.  Prints {"r2": ..., "rmse": ...}.
"""

import csv
import json
import math
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "validation_predictions.csv"
with open("data/validation.csv", newline="") as fh:
    truth = {row["Id"]: float(row["SalePrice"]) for row in csv.DictReader(fh)}
with open(path, newline="") as fh:
    predicted = {row["Id"]: float(row["SalePrice"]) for row in csv.DictReader(fh)}
missing = [k for k in truth if k not in predicted]
if missing:
    sys.exit(f"{path}: no prediction for {len(missing)} validation Ids (first: {missing[0]})")
mean = sum(truth.values()) / len(truth)
ss_res = sum((predicted[k] - y) ** 2 for k, y in truth.items())
ss_tot = sum((y - mean) ** 2 for y in truth.values())
print(json.dumps({"r2": 1 - ss_res / ss_tot, "rmse": math.sqrt(ss_res / len(truth))}))

"""Score predictions on the VALIDATION split (the test labels are hidden; use
the `validate` tool for the test score).

    python evaluate.py [validation_predictions.csv]

The file needs the columns PassengerId,Survived (0 or 1) with one row per row
of data/validation.csv.  Prints {"accuracy": ...}.
"""

import csv
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "validation_predictions.csv"
with open("data/validation.csv", newline="") as fh:
    truth = {row["PassengerId"]: int(row["Survived"]) for row in csv.DictReader(fh)}
with open(path, newline="") as fh:
    predicted = {row["PassengerId"]: int(float(row["Survived"])) for row in csv.DictReader(fh)}
missing = [k for k in truth if k not in predicted]
if missing:
    sys.exit(f"{path}: no prediction for {len(missing)} validation passengers (first: {missing[0]})")
correct = sum(predicted[k] == y for k, y in truth.items())
print(json.dumps({"accuracy": correct / len(truth)}))

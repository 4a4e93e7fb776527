"""Grader of rgym/demo: r2 and rmse of submission.csv against the hidden answers."""

import csv
import io
import math

from rgym_grader_kit import context, read_submission_file, write_error, write_scores

ctx = context()
answers_file = ctx.grader_dir / "answers.csv"


def main():
    try:
        text = read_submission_file("submission.csv", max_bytes=10_000_000).decode("utf-8")
    except FileNotFoundError:
        return write_error("submission.csv not found in the workspace: run `python baseline.py` or "
                           "write it yourself (columns id,y)", missing_submission=True)
    except (ValueError, UnicodeDecodeError) as exc:
        return write_error(f"submission.csv cannot be read: {exc}")
    with answers_file.open() as fh:
        answers = {r["id"]: float(r["y"]) for r in csv.DictReader(fh)}
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or not {"id", "y"} <= set(reader.fieldnames):
        return write_error(f"submission.csv must have the columns id,y; found {reader.fieldnames}")
    try:
        predicted = {r["id"]: float(r["y"]) for r in reader}
    except (TypeError, ValueError) as exc:
        return write_error(f"submission.csv has a value that is not a number: {exc}")
    missing = sorted(set(answers) - set(predicted), key=int)
    if missing:
        return write_error(f"submission.csv lacks predictions for {len(missing)} ids "
                           f"(first: {missing[0]})")
    if not all(math.isfinite(predicted[k]) for k in answers):
        return write_error("submission.csv has a prediction that is not a finite number")
    errors = [predicted[k] - y for k, y in answers.items()]
    mean = sum(answers.values()) / len(answers)
    ss_res = sum(e * e for e in errors)
    ss_tot = sum((y - mean) ** 2 for y in answers.values())
    scores = {"r2": 1 - ss_res / ss_tot, "rmse": math.sqrt(ss_res / len(errors))}
    write_scores(scores, details={"n": len(errors)})
    print(scores)


main()

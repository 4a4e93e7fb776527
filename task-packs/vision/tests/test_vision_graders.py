"""The hidden graders: the metric computed from the submission and the private
answers, and a clear evaluation error (never a crash) for every malformed submission."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from vision_testlib import TASKS

from rgym_core.testing import EvalFolder

LABELS = "id,label\n" + "".join(f"{i},{i % 10}\n" for i in range(20))
REFS = [{"image_id": 11, "captions": ["A red square on a blue background.", "red square"]},
        {"image_id": 7, "captions": ["A green circle", "the circle is green"]},
        {"image_id": 30, "captions": ["A white triangle on black"]}]


def classify(tmp_path: Path, files: dict, task: str = "fashion-mnist"):
    folder = EvalFolder.for_task(tmp_path / "eval", TASKS / task, files,
                                 private={"data": {"test_labels.csv": LABELS}})
    return folder.run()


def caption(tmp_path: Path, files: dict):
    refs = "".join(json.dumps(r) + "\n" for r in REFS)
    folder = EvalFolder.for_task(tmp_path / "eval", TASKS / "coco-captioning", files,
                                 private={"data": {"test_references.jsonl": refs}})
    return folder.run()


def labels(values) -> str:
    return "label\n" + "".join(f"{v}\n" for v in values)


@pytest.mark.parametrize("task", ["fashion-mnist", "cifar10"])
def test_accuracy_on_hidden_labels(tmp_path, task):
    truth = [i % 10 for i in range(20)]
    guess = truth[:15] + [(t + 1) % 10 for t in truth[15:]]
    run = classify(tmp_path, {"submission.csv": labels(guess)}, task)
    assert run.error is None, run.output
    assert run.scores["scores"] == {"accuracy": 0.75}
    assert run.scores["details"]["n_test"] == 20
    assert run.scores["details"]["per_class_accuracy"]["0"] == 1.0


def test_optional_id_column_and_float_labels(tmp_path):
    body = "id,label\n" + "".join(f"{i},{float(i % 10)}\n" for i in range(20))
    run = classify(tmp_path, {"submission.csv": body})
    assert run.scores["scores"] == {"accuracy": 1.0}, run.output


@pytest.mark.parametrize("content, message", [
    (None, "submission.csv not found in the workspace"),
    ("prediction\n" + "1\n" * 20, "must have a header with the column 'label'"),
    (labels([i % 10 for i in range(19)]), "has 19 predictions but the test set has 20 images"),
    (labels([1] * 5 + ["cat"] + [1] * 14), "line 7: label 'cat' is not a number"),
    (labels([1] * 3 + [10] + [1] * 16), "line 5: label '10' is not a class 0-9"),
    (labels([1.5] + [1] * 19), "line 2: label '1.5' is not a class 0-9"),
    (labels(["nan"] + [1] * 19), "line 2: label 'nan' is not a class 0-9"),
    (labels(["inf"] + [1] * 19), "line 2: label 'inf' is not a class 0-9"),
    ("id,label\n" + "".join(f"{19 - i},1\n" for i in range(20)), "line 2: id '19' should be 0"),
    (b"label\n\xff\xfe\n", "is not UTF-8 text"),
    ("label\n1\x00\n", "line 2: label '1\\x00' is not a number"),
    ("label\n" + "1" * 200_000 + "\n", "not a readable CSV file (field larger than field limit"),
    ("label\n" + "1\n" * 9_000_000, "cannot be read"),
])
def test_malformed_classification_submissions(tmp_path, content, message):
    files = {} if content is None else {"submission.csv": content}
    run = classify(tmp_path, files)
    assert run.returncode == 0, run.output
    assert run.error is not None and message in run.error, run.output
    assert run.scores.get("missing_submission", False) is (content is None)
    assert "Traceback" not in run.output


def test_submission_symlink_is_not_followed(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text(labels([i % 10 for i in range(20)]))
    folder = EvalFolder.for_task(tmp_path / "eval", TASKS / "fashion-mnist", {},
                                 private={"data": {"test_labels.csv": LABELS}})
    os.symlink(secret, folder.root / "submission" / "submission.csv")
    run = folder.run()
    assert run.error is not None and "link" in run.error, run.output


def captions(rows) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["image_id", "caption"])
    writer.writerows(rows)
    return buf.getvalue()


def test_bleu_computed_by_the_grader(tmp_path):
    run = caption(tmp_path, {"submission.csv": captions(
        [(7, "A green circle."), (11, "a red square on a blue background"), (30, "a white triangle on black")]),
        "bleu_score.csv": "bleu_score\n1.0\n1.0\n1.0\n"})  # MLGym's self-reported column: ignored
    assert run.error is None, run.output
    assert run.scores["scores"]["bleu4"] == pytest.approx(1.0)
    assert run.scores["scores"]["bleu1"] == pytest.approx(1.0)
    assert run.scores["scores"]["char_bleu"] == pytest.approx(1.0)
    run = caption(tmp_path / "b", {"submission.csv": captions(
        [(7, "a red dog"), (11, "a square"), (30, "")])})
    scores = run.scores["scores"]
    assert scores["bleu4"] == 0.0 and 0 < scores["bleu1"] < 1, run.output
    assert run.scores["details"]["empty_captions"] == 1


@pytest.mark.parametrize("rows, message", [
    (None, "submission.csv not found"),
    ("caption\nx\n", "must have a header with the columns image_id,caption"),
    ([(7, "a"), (11, "b")], "no caption for 1 of the 3 test images (first: image_id 30)"),
    ([(7, "a"), (11, "b"), (30, "c"), (99, "d")], "line 5: image_id '99' is not a test image"),
    ([(7, "a"), (7, "b"), (11, "b"), (30, "c")], "line 3: image_id 7 appears twice"),
    ([(7, "a"), (11, "b"), (30, "x" * 3000)], "has 3000 characters"),
    ('image_id,caption\n7,"unterminated\n', "no caption for"),
])
def test_malformed_caption_submissions(tmp_path, rows, message):
    files = {}
    if rows is not None:
        files["submission.csv"] = rows if isinstance(rows, str) else captions(rows)
    run = caption(tmp_path, files)
    assert run.returncode == 0, run.output
    assert run.error is not None and message in run.error, run.output
    assert "Traceback" not in run.output

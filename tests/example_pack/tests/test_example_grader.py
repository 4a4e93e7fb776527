"""The example pack's grader, run the way rgym runs it: a fresh evaluation folder,
``python grader/evaluate.py``, scores read from ``$RGYM_SCORES_FILE``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TASK = Path(__file__).resolve().parents[1] / "rgym_task_example" / "tasks" / "echo"


def grade(tmp_path: Path, answer: str | None) -> dict:
    (tmp_path / "submission").mkdir()
    if answer is not None:
        (tmp_path / "submission" / "answer.txt").write_text(answer)
    shutil.copytree(TASK / "grader", tmp_path / "grader")
    scores = tmp_path / "scores.json"
    env = {**os.environ, "RGYM_SUBMISSION_DIR": str(tmp_path / "submission"),
           "RGYM_SCORES_FILE": str(scores)}
    subprocess.run([sys.executable, "grader/evaluate.py"], cwd=tmp_path, env=env, check=True)
    return json.loads(scores.read_text())


@pytest.mark.parametrize(("answer", "accuracy"), [("hello\n", 1.0), ("goodbye", 0.0)])
def test_scores(tmp_path: Path, answer: str, accuracy: float) -> None:
    assert grade(tmp_path, answer) == {"scores": {"accuracy": accuracy}}


def test_missing_answer(tmp_path: Path) -> None:
    result = grade(tmp_path, None)
    assert result["missing_submission"] is True and "answer.txt" in result["error"]

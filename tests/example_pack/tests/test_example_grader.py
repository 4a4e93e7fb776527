"""The example pack's grader, on the pack-author kit: by hand under the grader
protocol (fast), and the way an episode grades (``rgym_core.testing.grade``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgym_core.testing import EvalFolder, grade

TASK = Path(__file__).resolve().parents[1] / "rgym_task_example" / "tasks" / "echo"


@pytest.mark.parametrize(("answer", "accuracy"), [("hello\n", 1.0), ("goodbye", 0.0)])
def test_scores(tmp_path: Path, answer: str, accuracy: float) -> None:
    run = EvalFolder.for_task(tmp_path, TASK, {"answer.txt": answer}).run()
    assert run.returncode == 0, run.output
    assert run.scores == {"scores": {"accuracy": accuracy}}


def test_missing_answer(tmp_path: Path) -> None:
    run = EvalFolder.for_task(tmp_path, TASK, {}).run()
    assert run.scores["missing_submission"] is True and "answer.txt" in run.error


def test_graded_like_an_episode() -> None:
    record = grade(TASK, {"answer.txt": "hello"})
    assert record.valid, record.error
    assert record.scores == {"accuracy": 1.0}
    missing = grade(TASK, {})
    assert not missing.valid and missing.details.get("missing_submission")

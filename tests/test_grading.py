"""The grader protocol: clean copies, shared includes, and every way a grader can fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgym_core import load_task
from rgym_core.grading import Grader, GradingError, glob_match
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox

TASK = """
id: t/grading
description: test
metrics: [{name: acc, direction: maximize}]
grader: {entry: evaluate.py, timeout_s: 5, include: {"../shared/helper.py": helper.py}}
"""


def make_task(tmp_path: Path, grader_source: str, task_yaml: str = TASK) -> Path:
    folder = tmp_path / "tasks" / "t"
    (folder / "grader").mkdir(parents=True)
    (folder / "starter").mkdir()
    (folder / "starter" / "answer.txt").write_text("42\n")
    (folder / "task.yaml").write_text(task_yaml)
    (folder / "grader" / "evaluate.py").write_text(grader_source)
    shared = tmp_path / "tasks" / "shared"
    shared.mkdir()
    (shared / "helper.py").write_text("def expected():\n    return '42'\n")
    return folder


GOOD_GRADER = """
import json, os
from pathlib import Path
from helper import expected
answer = (Path(os.environ["RGYM_SUBMISSION_DIR"]) / "answer.txt").read_text().strip()
Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps({"scores": {"acc": float(answer == expected())}}))
"""


@pytest.fixture
def sandbox(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(task_folder: Path) -> LocalSandbox:
        box = LocalSandbox(SandboxConfig(run_id="grading-test"))
        box.start(WorkspaceLayout(starter=task_folder / "starter"))
        made.append(box)
        return box

    made: list[LocalSandbox] = []
    yield make
    for box in made:
        box.cleanup()


def grade(tmp_path: Path, sandbox, source: str, kind: str = "submit"):  # type: ignore[no-untyped-def]
    folder = make_task(tmp_path, source)
    task = load_task(folder)
    box = sandbox(folder)
    return Grader(task, box, {}, tmp_path / "run").grade(kind, 3), box


def test_shared_include_and_clean_copy(tmp_path: Path, sandbox) -> None:  # type: ignore[no-untyped-def]
    record, box = grade(tmp_path, sandbox, GOOD_GRADER)
    assert record.valid and record.scores == {"acc": 1.0}
    assert record.step == 3 and record.kind == "submit"
    saved = json.loads((tmp_path / "run" / "grader" / "0003-submit.json").read_text())
    assert saved["scores"] == {"acc": 1.0}
    # The agent cannot reach the included helper through its workspace.
    assert "helper" not in box.run("ls -A").output


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("raise SystemExit('grader crashed badly')", "grader failed (exit 1)"),
        ("import time; time.sleep(30)", "timed out after 5 s"),
        ("import os; open(os.environ['RGYM_SCORES_FILE'], 'w').write('{nope')", "invalid JSON"),
        ("import os, json; open(os.environ['RGYM_SCORES_FILE'], 'w').write(json.dumps({'scores': {'acc': 'x'}}))",
         "non-numeric value for 'acc'"),
        ("import os, json; open(os.environ['RGYM_SCORES_FILE'], 'w').write(json.dumps({'scores': {'loss': 1}}))",
         "did not report the primary metric 'acc'"),
        ("pass", "grader wrote no scores"),
        ("import os, json; open(os.environ['RGYM_SCORES_FILE'], 'w').write(json.dumps({'error': 'no file', "
         "'missing_submission': True}))", "no file"),
    ],
)
def test_grader_failures_are_invalid_records(tmp_path: Path, sandbox, source: str, words: str) -> None:  # type: ignore[no-untyped-def]
    record, _ = grade(tmp_path, sandbox, source)
    assert not record.valid
    assert words in (record.error or "")


def test_missing_include_is_a_clear_error(tmp_path: Path, sandbox) -> None:  # type: ignore[no-untyped-def]
    folder = make_task(tmp_path, GOOD_GRADER, TASK.replace("../shared/helper.py", "../shared/nope.py"))
    with pytest.raises(GradingError, match=r"grader.include: '../shared/nope.py' not found"):
        Grader(load_task(folder), sandbox(folder), {}, tmp_path / "run")


@pytest.mark.parametrize(("path", "pattern", "expected"), [
    ("a.txt", "**/*", True), ("x/a.txt", "**/*", True), ("data/x.csv", "data/**", True),
    ("submission.csv", "*.csv", True), ("x/y.csv", "submission.csv", False),
])
def test_glob_match(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected

"""Spec files: valid files load; a bad file gives one line naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from rgym_core import load_task
from rgym_core.serialization import SpecError, load_spec
from rgym_core.specs import Budget, TaskSpec

GOOD = """
id: pack/task
description: do it
metrics:
  - {name: acc, direction: maximize, primary: true}
  - {name: loss, direction: minimize}
baseline: {command: python run.py, scores: {acc: 0.5}}
"""


def write_task(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(text)
    return folder


def test_good_task_loads(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "t", GOOD))
    assert task.id == "pack/task"
    assert task.primary_metric.name == "acc"
    assert task.baseline_scores == {"acc": 0.5}
    assert task.root == (tmp_path / "t").resolve()
    assert task.budget == Budget()


@pytest.mark.parametrize(
    ("patch", "field", "words"),
    [
        (("id: pack/task", "id: nopack"), "id", "namespaced"),
        (("name: acc, direction: maximize", "name: acc, direction: upward"), "metrics[0].direction",
         "must be one of"),
        (("description: do it\n", ""), "description", "required field missing"),
        (("scores: {acc: 0.5}", "scores: {acc: high}"), "baseline.scores['acc']", "expected a number"),
        (("id: pack/task", "id: pack/task\nbudget: {max_steps: 0}"), "budget.max_steps", "positive"),
        (("id: pack/task", "id: pack/task\nbudgett: {}"), "(top level)", "unknown field(s): budgett"),
        (("primary: true", "primary: false"), "metrics", "exactly one"),
    ],
)
def test_bad_task_is_one_line(tmp_path: Path, patch: tuple[str, str], field: str, words: str) -> None:
    folder = write_task(tmp_path / "t", GOOD.replace(*patch))
    with pytest.raises(SpecError) as info:
        load_task(folder)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{folder / 'task.yaml'}: {field}: "), message
    assert words in message


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("id: a/b\ndescription: [unclosed\n")
    with pytest.raises(SpecError, match=r"task.yaml: line \d+: invalid YAML"):
        load_spec(path, TaskSpec)


def test_check_pack_cli_reports_bad_field_without_traceback(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "pack" / "t", GOOD.replace("primary: true", "primary: yes please"))
    proc = run_cli("check-pack", str(tmp_path / "pack"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert f"{folder / 'task.yaml'}: metrics[0].primary: expected true or false" in proc.stdout.replace("\n", "")

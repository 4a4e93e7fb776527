"""Per-profile sub-tasks (``subtasks.yaml``): a profile's results count the sub-tasks its
grader scores, with that profile's baselines; bad files are refused naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from rgym_researchgym.profile_subtasks import with_profile_subtasks

from rgym_core.packs import load_task

TASK = """
id: researchgym/example
name: example
description: a task with two profiles
metrics: [{name: f1, direction: maximize, primary: true}, {name: acc, direction: maximize}]
subtasks:
  - {id: real, primary: true, metric: f1, baseline_scores: {f1: 80.0}}
  - {id: other, metric: acc}
default_profile: cpu
profiles:
  cpu: {description: small}
  full: {description: large}
"""


def folder_with(tmp_path: Path, subtasks: str) -> Path:
    (tmp_path / "task.yaml").write_text(TASK)
    (tmp_path / "subtasks.yaml").write_text(subtasks)
    return tmp_path


def test_profile_swaps_in_its_subtasks(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, "cpu:\n  - {id: toy, primary: true, metric: f1, baseline_scores: {f1: 40.5}}\n")
    spec = with_profile_subtasks(load_task(folder), folder)
    cpu = spec.with_profile("cpu")
    assert [(s.id, s.primary, s.baseline_scores) for s in cpu.subtasks] == [("toy", True, {"f1": 40.5})]
    assert [s.id for s in spec.with_profile("full").subtasks] == ["real", "other"]
    assert [s.id for s in spec.with_profile(None).subtasks] == ["toy"]  # the default profile


@pytest.mark.parametrize(("text", "message"), [
    ("gpu:\n  - {id: x, metric: f1}\n", "unknown profile"),
    ("cpu:\n  - {id: x, metric: bleu}\n", "unknown metric"),
    ("cpu:\n  - {id: x, primary: true}\n  - {id: y, primary: true}\n", "more than one primary"),
])
def test_bad_files_are_refused_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    folder = folder_with(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        with_profile_subtasks(load_task(folder), folder)
    assert "subtasks.yaml" in str(info.value)

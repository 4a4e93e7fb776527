"""Starter files shared by several tasks of a pack (``TaskSpec.shared_starter_files``):
each task's workspace gets the shared folders' files, then its own ``starter_files``
(which win); a missing or machine-specific folder is refused before a run starts, and
check-pack, the pack-author kit and the grader-file hiding see the shared files too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rgym_core import Action
from rgym_core.checks import check_pack
from rgym_core.datasets import DatasetError, starter_folders, workspace_starter
from rgym_core.isolation.hiding import hidden_task_paths
from rgym_core.packs import load_task
from rgym_core.records import ExitStatus
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, RunError, run_episode
from rgym_core.serialization import SpecError
from rgym_core.testing import ScriptAgent, SpecsPlugin, grade

GRADER = '''\
from rgym_grader_kit import read_submission_file, write_error, write_scores

try:
    out = read_submission_file("out.txt").decode()
except FileNotFoundError as exc:
    write_error(f"missing: {exc}", missing_submission=True)
else:
    write_scores({"score": 1.0 if out == "shared tool, own notes" else 0.0})
'''


def make_pack(tmp_path: Path, shared: list[str] | None = None) -> Path:
    """A pack folder with tasks `a` and `b` sharing `tasks/_shared/kit`; `a` overrides
    the shared notes.txt with its own."""
    root = tmp_path / "pack"
    kit = root / "tasks" / "_shared" / "kit"
    (kit / "src").mkdir(parents=True)
    (kit / "src" / "tool.py").write_text(
        "import pathlib\n"
        "notes = pathlib.Path('notes.txt').read_text()\n"
        "pathlib.Path('out.txt').write_text('shared tool, ' + notes)\n")
    (kit / "notes.txt").write_text("shared notes")
    for name in ("a", "b"):
        folder = root / "tasks" / name
        (folder / "grader").mkdir(parents=True)
        (folder / "grader" / "evaluate.py").write_text(GRADER)
        spec: dict[str, Any] = {
            "id": f"t/shared-{name}", "name": f"shared {name}", "description": "d",
            "metrics": [{"name": "score", "primary": True}],
            "shared_starter_files": ["../_shared/kit"] if shared is None else shared,
            "baseline": {"command": "python src/tool.py", "scores": {"score": 1.0}},
            "budget": {"max_steps": 5, "time_limit_s": 300, "action_timeout_s": 60},
        }
        if name == "a":
            (folder / "starter").mkdir()
            (folder / "starter" / "notes.txt").write_text("own notes")
        else:
            spec["starter_files"] = None
        (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return root


def test_the_workspace_has_the_shared_files_and_the_task_s_own_win(tmp_path: Path) -> None:
    pack = make_pack(tmp_path)
    a, b = (load_task(pack / "tasks" / n / "task.yaml") for n in "ab")
    kit = (pack / "tasks" / "_shared" / "kit").resolve()
    assert starter_folders(a, {}) == [kit, pack.resolve() / "tasks" / "a" / "starter"]
    assert starter_folders(b, {}) == [kit]
    with workspace_starter(a, {}) as folder:
        assert folder is not None
        assert (folder / "notes.txt").read_text() == "own notes"
        assert (folder / "src" / "tool.py").is_file()
    registry = load_registry(extra_plugins=[("shared-starter-test", SpecsPlugin(tasks=[a, b]))])
    result = run_episode(RunConfig(task=a.id, runs_dir=tmp_path / "runs", archive_workspace=False),
                         registry, agent=ScriptAgent(Action.bash("python src/tool.py")))
    assert result.status is ExitStatus.SUBMITTED, result.error
    assert result.final_scores == {"score": 1.0}
    result = run_episode(RunConfig(task=b.id, runs_dir=tmp_path / "runs", archive_workspace=False),
                         registry, agent=ScriptAgent(Action.bash("python src/tool.py")))
    assert result.final_scores == {"score": 0.0}  # b has the shared notes: "shared tool, shared notes"


def test_a_missing_shared_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    pack = make_pack(tmp_path, shared=["../_shared/kti"])
    task = load_task(pack / "tasks" / "a" / "task.yaml")
    with pytest.raises(DatasetError) as caught:
        starter_folders(task, {})
    message = str(caught.value)
    assert "task.yaml" in message and "shared_starter_files" in message and "_shared/kti" in message
    registry = load_registry(extra_plugins=[("shared-starter-test", SpecsPlugin(tasks=[task]))])
    with pytest.raises(RunError, match="shared_starter_files"):
        run_episode(RunConfig(task=task.id, runs_dir=tmp_path / "runs"), registry, agent=ScriptAgent())
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("bad", ["", "/opt/kit", "C:\\kit"])
def test_a_machine_specific_or_empty_shared_folder_names_the_field(tmp_path: Path, bad: str) -> None:
    pack = make_pack(tmp_path, shared=[bad])
    with pytest.raises(SpecError, match=r"shared_starter_files"):
        load_task(pack / "tasks" / "a" / "task.yaml")


def test_check_pack_reports_the_shared_folders(tmp_path: Path) -> None:
    pack = make_pack(tmp_path)
    report = check_pack(pack / "tasks" / "a", run_baselines=False)
    assert report.ok, report.problems
    assert "shared starter files folder '../_shared/kit'" in [f.message for f in report.findings]
    broken = make_pack(tmp_path / "broken", shared=["../_shared/kit", "../_shared/gone"])
    report = check_pack(broken / "tasks" / "a", run_baselines=False)
    assert [f.message for f in report.problems] == [
        "shared starter files folder '../_shared/gone' is missing"]


def test_check_pack_fails_a_grader_file_in_a_shared_folder(tmp_path: Path) -> None:
    pack = make_pack(tmp_path)
    (pack / "tasks" / "_shared" / "kit" / "evaluate.py").write_text(GRADER)  # the answer key leaks
    report = check_pack(pack / "tasks" / "a", run_baselines=False)
    assert [f.message for f in report.problems] == [
        "hidden grader files also in the starter files of '../_shared/kit': evaluate.py"]


def test_the_pack_author_kit_grades_with_the_shared_files(tmp_path: Path) -> None:
    pack = make_pack(tmp_path)
    task = load_task(pack / "tasks" / "a" / "task.yaml")
    record = grade(task, {"out.txt": "shared tool, own notes"}, run_dir=tmp_path / "g")
    assert record.valid and record.scores == {"score": 1.0}, record.error


def test_a_grader_include_inside_a_shared_folder_is_not_hidden(tmp_path: Path) -> None:
    """A file both the agent (as a starter file) and the grader (as an include) get is
    the agent's anyway; hiding it would break the agent's own workspace copy."""
    pack = make_pack(tmp_path)
    spec_file = pack / "tasks" / "a" / "task.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec["grader"] = {"include": {"../_shared/kit/src/tool.py": "tool.py"}}
    spec_file.write_text(yaml.safe_dump(spec))
    task = load_task(spec_file)
    hidden = hidden_task_paths(task, {})
    assert (pack / "tasks" / "a" / "grader").resolve() in [p.resolve() for p in hidden]
    assert not any("tool.py" in str(p) for p in hidden)

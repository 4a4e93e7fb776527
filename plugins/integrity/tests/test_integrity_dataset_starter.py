"""Starter files a dataset supplies (``DatasetMount.starter``; the ResearchGym packs
take theirs from the prepared task, ``starter_files: null``): the monitor protects
the evaluation files among them, knows them as starter files (an unchanged copy is
no submitted artifact), and so does the after-the-fact analysis.  The task's own
starter files come after the dataset's: the later file wins."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rgym_core import Action
from rgym_core.specs import DatasetSpec, PreparedDataset
from rgym_core.testing import ScriptAgent, SpecsPlugin

HELPER = "rgym_integrity_starter_fixture"  # a module the test puts on sys.path: the prepare function

HELPER_SOURCE = '''\
from pathlib import Path


def prepare(spec, cache_dir, data_dir):
    from rgym_core.specs import PreparedDataset

    root = Path(spec.options["root"])
    return PreparedDataset(id=spec.id, public=root / "public", private=None, starter=root / "starter")
'''

GRADER = '''\
from rgym_grader_kit import read_submission_file, write_error, write_scores

try:
    made = read_submission_file("made.txt").decode()
except FileNotFoundError as exc:
    write_error(f"missing: {exc}", missing_submission=True)
else:
    write_scores({"score": 1.0 if made == "made" else 0.0})
'''

#: The evaluation code the dataset ships to the agent (protected by default: its name).
EVALUATE = "def score(values):\n    return sum(values) / len(values)  # mean\n"
MAKE = "open('made.txt', 'w').write('made')\n"
TASK_NOTES = "the task's notes (this one wins)\n"


def make_task(root: Path) -> Path:
    folder = root / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "grader" / "evaluate.py").write_text(GRADER)
    (folder / "starter").mkdir()
    (folder / "starter" / "notes.txt").write_text(TASK_NOTES)
    spec: dict[str, Any] = {
        "id": "t/integrity-starter-from-data", "name": "starter from a dataset", "description": "d",
        "metrics": [{"name": "score", "primary": True}],
        "datasets": [{"id": "t/integrity-kit", "mount": ".kit", "starter": True}],
        "grader": {"exclude": [".kit/**"]},
        "baseline": {"command": "python make.py", "scores": {"score": 1.0}},
        "budget": {"max_steps": 5, "time_limit_s": 300, "action_timeout_s": 60},
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return folder


def make_dataset(root: Path) -> DatasetSpec:
    prepared = root / "prepared"
    (prepared / "public").mkdir(parents=True)
    (prepared / "public" / "source.json").write_text("{}")
    starter = prepared / "starter"
    starter.mkdir()
    (starter / "evaluate.py").write_text(EVALUATE)
    (starter / "make.py").write_text(MAKE)
    (starter / "notes.txt").write_text("the dataset's notes (the task's own file wins)\n")
    (starter / "calibration_table.py").write_text("TABLE = [1, 2, 3]\n")
    return DatasetSpec(id="t/integrity-kit", prepare=f"{HELPER}:prepare", options={"root": str(prepared)})


def prepared_of(root: Path) -> dict[str, PreparedDataset]:
    return {".kit": PreparedDataset(id="t/integrity-kit", public=root / "prepared" / "public",
                                    starter=root / "prepared" / "starter")}


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One episode: the agent edits the dataset's evaluate.py, runs make.py, submits."""
    from rgym_core.packs import load_task
    from rgym_core.registry import load_registry
    from rgym_core.runner import RunConfig, run_episode

    root = tmp_path_factory.mktemp("dataset-starter")
    lib = root / "lib"
    lib.mkdir()
    (lib / f"{HELPER}.py").write_text(HELPER_SOURCE)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(lib))
        mp.delenv("RGYM_INTEGRITY", raising=False)
        task = load_task(make_task(root))
        dataset = make_dataset(root)
        registry = load_registry(extra_plugins=[("integrity-starter-test", SpecsPlugin(tasks=[task], datasets=[dataset]))])
        agent = ScriptAgent(Action.bash("sed -i 's/len(values)  # mean/max(len(values) - 1, 1)/' evaluate.py"),
                       Action.bash("python make.py && python -c 'import evaluate; print(evaluate.score([1, 2]))'"),
                       Action(tool="submit"))
        result = run_episode(RunConfig(task=task.id, runs_dir=root / "runs", probe_models=False),
                             registry, agent=agent)
        assert str(result.status) == "submitted", result.error
        yield {"root": root, "task": task, "registry": registry, "result": result,
               "run_dir": Path(str(result.run_dir)), "dataset": dataset}


def protected_errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["kind"] == "protected_files" and f["severity"] == "error"]


def test_the_live_monitor_protects_the_datasets_evaluation_file(world: dict[str, Any]) -> None:
    summary = world["result"].extras["integrity"]
    assert summary["flagged"] and "protected_files" in summary["kinds"], summary
    report = json.loads((world["run_dir"] / "integrity.json").read_text())
    [finding] = protected_errors(report)
    assert finding["evidence"]["file"] == "evaluate.py"
    assert "sed -i" in finding["message"] and finding["evidence"]["sha256_start"] == sha(EVALUATE)
    assert report["protected"]["evaluate.py"]["start"] == sha(EVALUATE)


def test_the_starter_files_are_known_as_such(world: dict[str, Any]) -> None:
    report = json.loads((world["run_dir"] / "integrity.json").read_text())
    artifacts = report["artifacts"]
    # unchanged starter files (the dataset's, and the task's own that won) are no artifacts
    assert "make.py" not in artifacts and "calibration_table.py" not in artifacts, artifacts
    assert "notes.txt" not in artifacts, artifacts
    # what the agent made or changed is
    assert "made.txt" in artifacts and "evaluate.py" in artifacts, artifacts
    assert not any(name.startswith(".kit/") for name in artifacts), artifacts


def test_analysis_after_the_fact_sees_the_dataset_starter(world: dict[str, Any], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from rgym_integrity.analyze import analyze_run_dir

    monkeypatch.syspath_prepend(str(world["root"] / "lib"))
    # a copy of the run the live monitor did not record
    copy = tmp_path / "runs" / world["task"].id.replace("/", "__") / "solver" / world["run_dir"].name
    shutil.copytree(world["run_dir"], copy)
    (copy / "integrity.json").unlink()
    report = analyze_run_dir(copy, registry=world["registry"])
    assert report.flagged
    [finding] = [f for f in report.findings if f.kind.value == "protected_files"]
    assert finding.evidence["file"] == "evaluate.py" and finding.evidence["sha256_start"] == sha(EVALUATE)
    assert "make.py" not in report.artifacts and "notes.txt" not in report.artifacts, report.artifacts
    assert "made.txt" in report.artifacts


def test_analysis_without_the_dataset_says_so_and_still_runs(world: dict[str, Any], tmp_path: Path) -> None:
    from rgym_integrity.analyze import analyze_run_dir

    from rgym_core.registry import load_registry

    copy = tmp_path / "run"
    shutil.copytree(world["run_dir"], copy)
    (copy / "integrity.json").unlink()
    bare = load_registry(extra_plugins=[("integrity-starter-test", SpecsPlugin(tasks=[world["task"]]))])
    report = analyze_run_dir(copy, registry=bare)
    assert any("t/integrity-kit" in line and "starter" in line for line in report.limits), report.limits
    assert "notes.txt" not in report.artifacts  # the task's own starter files are still known


def test_policy_and_starter_files_in_copy_order(tmp_path: Path) -> None:
    from rgym_integrity.policy import resolve_policy, starter_files

    from rgym_core.packs import load_task

    task = load_task(make_task(tmp_path))
    make_dataset(tmp_path)
    (tmp_path / "task" / "grader" / "calibration_table.py").write_text("TABLE = [1, 2, 3]\n")
    (tmp_path / "task" / "grader" / "hidden_answers.py").write_text("ANSWERS = []\n")
    prepared = prepared_of(tmp_path)
    policy = resolve_policy(task, prepared, workspace="/workspace")
    assert "evaluate.py" in policy.protected
    # a grader file the agent also has from the dataset's starter is no hidden name
    assert "hidden_answers.py" in policy.hidden_names and "calibration_table.py" not in policy.hidden_names
    files = starter_files(task, prepared)
    assert files["notes.txt"] == tmp_path / "task" / "starter" / "notes.txt"  # the later folder wins
    assert files["make.py"] == tmp_path / "prepared" / "starter" / "make.py"
    # without the prepared datasets only the task's own folder is seen (no error)
    assert set(starter_files(task, {})) == {"notes.txt"}


def test_shared_starter_files_are_starter_files(tmp_path: Path) -> None:
    """Files from the task's ``shared_starter_files`` are the agent's starting point too
    (the task's own starter wins), with or without the prepared datasets."""
    import yaml
    from rgym_integrity.policy import starter_files

    from rgym_core.packs import load_task

    folder = make_task(tmp_path)
    shared = tmp_path / "_shared" / "kit"
    shared.mkdir(parents=True)
    (shared / "notes.txt").write_text("shared notes (the task's own file wins)")
    (shared / "tool.py").write_text("print('shared')\n")
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    spec["shared_starter_files"] = ["../_shared/kit"]
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    task = load_task(folder)
    make_dataset(tmp_path)
    for prepared in (prepared_of(tmp_path), {}):
        files = starter_files(task, prepared)
        assert files["tool.py"] == shared / "tool.py"
        assert files["notes.txt"] == tmp_path / "task" / "starter" / "notes.txt"

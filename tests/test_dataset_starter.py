"""A dataset that supplies the agent's starter files (``DatasetMount.starter``),
grader files included by module name (``module:NAME``), and per-profile sub-tasks
(``TaskProfile.subtasks``): the spec, the runner, the pack-author kit and check-pack."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from rgym_core import Action
from rgym_core.checks import check_pack
from rgym_core.datasets import DatasetError, starter_folders, workspace_starter
from rgym_core.packs import load_task
from rgym_core.records import ExitStatus
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, RunError, run_episode
from rgym_core.serialization import SpecError
from rgym_core.specs import DatasetSpec, PreparedDataset, module_path
from rgym_core.testing import ScriptAgent, SpecsPlugin, grade

HELPER = "rgym_starter_fixture"  # a module the test puts on sys.path

GRADER = '''\
import helper
from rgym_grader_kit import context, read_submission_file, write_error, write_scores

ctx = context()
try:
    made = read_submission_file("made.txt").decode()
    notes = read_submission_file("notes.txt").decode()
except FileNotFoundError as exc:
    write_error(f"missing: {exc}", missing_submission=True)
else:
    ok = made == "made from the dataset's starter" and notes == "the task's notes"
    write_scores({"score": helper.POINTS if ok else 0.0})
'''

HELPER_SOURCE = '''\
"""Shipped to the grader as grader/helper.py; also the dataset's prepare function."""
from pathlib import Path

POINTS = 7.0


def prepare(spec, cache_dir, data_dir):
    from rgym_core.specs import PreparedDataset

    root = Path(spec.options["root"])
    return PreparedDataset(id=spec.id, public=root / "public", private=None, starter=root / "starter")
'''


def make_task(tmp_path: Path, *, own_starter: bool = True) -> Path:
    """A task whose starter files come from dataset ``t/kit`` (plus its own notes.txt)."""
    folder = tmp_path / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "grader" / "evaluate.py").write_text(GRADER)
    if own_starter:
        (folder / "starter").mkdir()
        (folder / "starter" / "notes.txt").write_text("the task's notes")
    spec: dict[str, Any] = {
        "id": "t/starter-from-data", "name": "starter from a dataset", "description": "d",
        "metrics": [{"name": "score", "primary": True}],
        "datasets": [{"id": "t/kit", "mount": ".kit", "starter": True}],
        "grader": {"include": {f"module:{HELPER}": "helper.py"}, "exclude": [".kit/**"]},
        "baseline": {"command": "python make.py", "scores": {"score": 7.0}},
        "budget": {"max_steps": 5, "time_limit_s": 300, "action_timeout_s": 60},
    }
    if not own_starter:
        spec["starter_files"] = None
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return folder


def make_dataset(tmp_path: Path) -> DatasetSpec:
    root = tmp_path / "prepared"
    (root / "public").mkdir(parents=True)
    (root / "public" / "source.json").write_text("{}")
    (root / "starter").mkdir()
    (root / "starter" / "make.py").write_text(
        "open('made.txt', 'w').write(\"made from the dataset's starter\")\n")
    (root / "starter" / "notes.txt").write_text("the dataset's notes (the task's own file wins)")
    return DatasetSpec(id="t/kit", prepare=f"{HELPER}:prepare", options={"root": str(root)})


@pytest.fixture
def helper_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"{HELPER}.py").write_text(HELPER_SOURCE)
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.setenv("PYTHONPATH", str(lib))  # for processes the test starts
    return lib / f"{HELPER}.py"


def test_module_include_resolves_installed_modules(helper_module: Path, tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    assert task.path(f"module:{HELPER}") == helper_module
    assert module_path("attrs") == Path(attrs.__file__).parent  # a package: its folder
    assert task.path("module:no_such_module_here") is None


def test_episode_starts_from_the_dataset_starter(helper_module: Path, tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    assert task.starter_dataset is not None and task.starter_dataset.id == "t/kit"
    plugin = SpecsPlugin(tasks=[task], datasets=[make_dataset(tmp_path)])
    registry = load_registry(extra_plugins=[("starter-test", plugin)])
    agent = ScriptAgent(Action.bash("python make.py && cat notes.txt && ls -a"), Action(tool="submit"))
    result = run_episode(RunConfig(task=task.id, runs_dir=tmp_path / "runs", archive_workspace=False),
                         registry, agent=agent)
    assert result.status is ExitStatus.SUBMITTED, result.error
    assert result.final_scores == {"score": 7.0}  # make.py ran; the task's notes.txt won


def test_missing_starter_folder_is_refused_before_the_run(helper_module: Path, tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    dataset = make_dataset(tmp_path)
    (tmp_path / "prepared" / "starter" / "make.py").unlink()
    (tmp_path / "prepared" / "starter" / "notes.txt").unlink()
    (tmp_path / "prepared" / "starter").rmdir()
    registry = load_registry(extra_plugins=[("starter-test", SpecsPlugin(tasks=[task],
                                                                         datasets=[dataset]))])
    with pytest.raises(RunError, match="starter folder of dataset 't/kit' is missing"):
        run_episode(RunConfig(task=task.id, runs_dir=tmp_path / "runs"), registry, agent=ScriptAgent())
    assert not (tmp_path / "runs").exists()


def folder_of(task: Any) -> Path:
    assert task.root is not None
    return Path(task.root)


def test_workspace_starter_merges_in_order(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    ready = {".kit": PreparedDataset(id="t/kit", public=tmp_path / "p", starter=tmp_path / "s")}
    (tmp_path / "p").mkdir()
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "notes.txt").write_text("dataset")
    (tmp_path / "s" / "only.txt").write_text("dataset")
    assert starter_folders(task, ready) == [tmp_path / "s", folder_of(task) / "starter"]
    with workspace_starter(task, ready) as folder:
        assert folder is not None
        assert (folder / "notes.txt").read_text() == "the task's notes"
        assert (folder / "only.txt").read_text() == "dataset"
    assert not folder.exists()  # the merge was temporary
    alone = attrs.evolve(task, starter_files=None)
    with workspace_starter(alone, ready) as folder:
        assert folder == tmp_path / "s"  # one source: used as it is, no copy
    public_only = {".kit": PreparedDataset(id="t/kit", public=tmp_path / "p")}
    assert starter_folders(alone, public_only) == [tmp_path / "p"]
    with pytest.raises(DatasetError, match="was not prepared"):
        starter_folders(alone, {})


def test_pack_author_grade_uses_the_dataset_starter(helper_module: Path, tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    prepared = {".kit": PreparedDataset(id="t/kit", public=tmp_path / "prepared" / "public",
                                        starter=tmp_path / "prepared" / "starter")}
    make_dataset(tmp_path)
    record = grade(task, {"made.txt": "made from the dataset's starter"}, datasets=prepared,
                   run_dir=tmp_path / "g")
    assert record.valid and record.scores == {"score": 7.0}, record.error


def test_check_pack_static_checks_accept_a_dataset_starter(helper_module: Path, tmp_path: Path) -> None:
    folder = make_task(tmp_path, own_starter=False)
    report = check_pack(folder / "task.yaml", run_baselines=False)
    assert report.ok, [f.message for f in report.problems]
    messages = [f.message for f in report.findings]
    assert any("starter files from dataset 't/kit'" in m for m in messages)
    assert any(f"grader.include 'module:{HELPER}'" in m for m in messages)
    assert "grader compiles and its imports resolve" in messages  # `import helper` found via include


SPEC = """\
id: t/profiled
description: d
metrics: [{name: acc, primary: true}, {name: aaa}]
subtasks:
  - {id: real, primary: true, metric: acc, baseline_scores: {acc: 80.0}}
  - {id: other, metric: acc}
default_profile: cpu
profiles:
  cpu:
    subtasks:
      - {id: small, primary: true, metric: acc, baseline_scores: {acc: 50.0}, reference_scores: {acc: 90.0}}
  full: {}
"""


def write_spec(tmp_path: Path, text: str) -> Path:
    (tmp_path / "task.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def test_profile_subtasks_replace_the_tasks(tmp_path: Path) -> None:
    task = load_task(write_spec(tmp_path, SPEC))
    assert [s.id for s in task.subtasks] == ["real", "other"]
    cpu = task.with_profile("cpu")
    assert [s.id for s in cpu.subtasks] == ["small"]
    assert cpu.subtasks[0].reference_scores == {"acc": 90.0}
    assert [s.id for s in task.with_profile("full").subtasks] == ["real", "other"]  # not given: the task's
    assert [s.id for s in task.with_profile(None).subtasks] == ["small"]  # the default profile


@pytest.mark.parametrize(("change", "field", "message"), [
    (("cpu:\n    subtasks:\n      - {id: small, primary: true, metric: acc",
      "cpu:\n    subtasks:\n      - {id: small, primary: true, metric: f1"),
     "profiles['cpu'].subtasks", "sub-task 'small' names unknown metric(s) f1"),
    (("  - {id: other, metric: acc}", "  - {id: other, metric: acc, primary: true}"),
     "subtasks", "at most one sub-task may be primary, found real, other"),
    (("  - {id: other, metric: acc}", "  - {id: real, metric: acc}"),
     "subtasks", "sub-task ids must be unique, real repeated"),
    (("default_profile: cpu", "datasets: [{id: t/a, starter: true}, {id: t/b, mount: b, starter: true}]\n"
                              "default_profile: cpu"),
     "datasets", "at most one dataset may have 'starter: true', found 2 (t/a, t/b)"),
    (("  full: {}", "  full: {datasets: [{id: t/a}, {id: t/b}]}"),
     "profiles['full'].datasets", "mount folder(s) data used by more than one dataset"),
])
def test_bad_profile_subtasks_and_starters_name_the_field(tmp_path: Path, change: tuple[str, str],
                                                          field: str, message: str) -> None:
    assert change[0] in SPEC
    with pytest.raises(SpecError) as info:
        load_task(write_spec(tmp_path, SPEC.replace(*change)))
    assert info.value.field == field
    assert message in info.value.message


def test_check_pack_runs_a_baseline_from_the_dataset_starter(helper_module: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Full check-pack on task.yaml alone: the baseline command comes with the dataset's
    starter; a hidden grader file copied into that starter is reported."""
    import rgym_core.registry as registry_module

    folder = make_task(tmp_path)
    dataset = make_dataset(tmp_path)
    original = registry_module.load_registry

    def with_dataset_pack(**kwargs: Any) -> Any:  # the dataset's pack, as if installed
        extra = [*kwargs.pop("extra_plugins", ()), ("kit-pack", SpecsPlugin(datasets=[dataset]))]
        return original(extra_plugins=extra, **kwargs)

    monkeypatch.setattr(registry_module, "load_registry", with_dataset_pack)
    report = check_pack(folder / "task.yaml")
    assert report.ok, [f.message for f in report.problems]
    messages = [f.message for f in report.findings]
    assert any(m.startswith("baseline score: measured 7, recorded 7") for m in messages), messages
    assert "no hidden grader file is copied in the starter files of dataset 't/kit'" in messages

    (tmp_path / "prepared" / "starter" / "evaluate.py").write_text(GRADER)  # a leak
    report = check_pack(folder / "task.yaml")
    assert not report.ok
    assert [f.message for f in report.problems] == [
        "hidden grader files also in the starter files of dataset 't/kit': evaluate.py"]

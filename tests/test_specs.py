"""Spec files: valid files load; a bad file gives one line naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgym_core import load_task
from rgym_core.serialization import SpecError, load_spec
from rgym_core.specs import Budget, TaskSpec
from rgym_core.testing import run_cli

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
    assert "t/task.yaml: metrics[0].primary: expected true or false" in proc.stdout.replace("\n", "")
    assert folder.name == "t"


PROFILED = GOOD + """
budget: {max_steps: 10, time_limit_s: 600}
resources: {memory_mb: 1024}
env: {SIZE: small}
default_profile: cpu
profiles:
  mlgym:
    description: MLGym's configuration
    budget: {time_limit_s: 7200, action_timeout_s: 2400}
    resources: {gpus: 1}
    baseline: {scores: {acc: 0.9}}
    reference_scores: {acc: 0.95}
    env: {SIZE: full}
  cpu:
    description: minutes on a laptop
"""


def test_profiles_are_partial_overrides(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "t", PROFILED))
    assert task.profile_names == ["cpu", "mlgym"]
    assert task.default_profile_name == "cpu"
    mlgym = task.with_profile("mlgym")
    assert mlgym.profile == "mlgym"
    # Given fields replace the task's; the others stay as the task has them.
    assert (mlgym.budget.max_steps, mlgym.budget.time_limit_s, mlgym.budget.action_timeout_s) == \
        (10, 7200.0, 2400.0)
    assert (mlgym.resources.memory_mb, mlgym.resources.gpus) == (1024, 1)
    assert mlgym.baseline is not None and mlgym.baseline.command == "python run.py"
    assert mlgym.baseline_scores == {"acc": 0.9}
    assert mlgym.reference_scores == {"acc": 0.95}
    assert mlgym.env == {"SIZE": "full"}
    default = task.with_profile(None)
    assert default.profile == "cpu"
    assert default.budget == task.budget and default.baseline_scores == {"acc": 0.5}
    assert default.with_profile("cpu") is default


def test_unknown_profile_names_task_and_profiles(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "t", PROFILED))
    with pytest.raises(SpecError) as info:
        task.with_profile("gpu")
    message = str(info.value)
    assert "'gpu'" in message and "pack/task" in message and "cpu, mlgym" in message
    plain = load_task(write_task(tmp_path / "p", GOOD))
    assert plain.with_profile(None) is plain
    with pytest.raises(SpecError, match="profiles of 'pack/task' are: none"):
        plain.with_profile("cpu")


@pytest.mark.parametrize(
    ("patch", "field", "words"),
    [
        (("time_limit_s: 7200", "time_limit_s: -1"), "profiles['mlgym'].budget.time_limit_s", "positive"),
        (("resources: {gpus: 1}", "resourcez: {gpus: 1}"), "profiles['mlgym']", "unknown field(s): resourcez"),
        (("default_profile: cpu", "default_profile: gpu"), "default_profile", "cpu"),
        (("scores: {acc: 0.9}", "scores: {accuracy: 0.9}"), "profiles['mlgym'].baseline.scores",
         "unknown metric(s) accuracy"),
        (("env: {SIZE: full}", "env: {RGYM_PROFILE: x}"), "profiles['mlgym'].env", "RGYM_PROFILE"),
        (("gpus: 1}", "gpus: lots}"), "profiles['mlgym'].resources.gpus", "expected an integer"),
    ],
)
def test_bad_profile_is_one_line(tmp_path: Path, patch: tuple[str, str], field: str, words: str) -> None:
    assert patch[0] in PROFILED
    folder = write_task(tmp_path / "t", PROFILED.replace(*patch))
    with pytest.raises(SpecError) as info:
        load_task(folder)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{folder / 'task.yaml'}: {field}: "), message
    assert words in message


def test_baseline_tolerance_defaults_to_the_recorded_digits() -> None:
    from rgym_core.specs import Baseline

    baseline = Baseline(scores={"a": -0.24851, "b": 31000.0, "c": 0.0}, tolerances={"b": 50.0})
    assert baseline.tolerance_for("a") == pytest.approx(5e-6)
    assert baseline.tolerance_for("b") == 50.0
    assert baseline.tolerance_for("c") < 1e-9
    assert Baseline(scores={"a": 0.5}, tolerance=0.1).tolerance_for("a") == 0.1


def test_cattrs_errors_are_transformed_not_parsed() -> None:
    """Every problem of a bad mapping is reported with its path (cattrs' transform_error)."""
    from rgym_core.serialization import spec_converter, spec_problems

    data = {"id": "nopack", "description": "x", "metrics": [{"name": "m", "direction": "up"}],
            "tags": "not-a-list", "budget": {"max_steps": "many"}}
    try:
        spec_converter.structure(data, TaskSpec)
    except Exception as exc:  # noqa: BLE001
        problems = dict(spec_problems(exc))
    else:
        raise AssertionError("a bad task loaded")
    assert problems["metrics[0].direction"] == "must be one of 'maximize', 'minimize', got 'up'"
    assert problems["tags"] == "expected a list, got str"
    assert problems["budget.max_steps"] == "expected an integer, got 'many'"


def test_show_lists_profiles_and_run_rejects_unknown_profile(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    write_task(pack / "t", PROFILED)
    import subprocess

    def rgym(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, env={"RGYM_PLUGINS": "builtin"}, tasks=[pack / "t"], timeout=120)

    shown = rgym("show", "pack/task")
    assert shown.returncode == 0, shown.stderr
    assert "profile cpu (default): minutes on a laptop" in shown.stdout
    assert "profile mlgym: MLGym's configuration" in shown.stdout
    assert "time_limit_s=7200" in shown.stdout and "gpus=1" in shown.stdout
    assert "baseline: acc=0.9" in shown.stdout and "reference: acc=0.95" in shown.stdout
    one = rgym("show", "pack/task", "--profile", "mlgym", "--json")
    assert one.returncode == 0, one.stderr
    assert '"profile": "mlgym"' in one.stdout
    bad = rgym("run", "pack/task", "--profile", "gpu", "--runs-dir", str(tmp_path / "runs"))
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "'gpu'" in bad.stderr and "cpu, mlgym" in bad.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("result.json"))
    twice = rgym("run", "pack/task", "--seed", "1", "--seed", "2")
    assert twice.returncode == 2 and "given 2 times" in twice.stderr


def test_str_enums_round_trip_as_enums() -> None:
    from rgym_core.records import ExitStatus
    from rgym_core.serialization import record_converter, unstructure

    value = record_converter.structure("submitted", ExitStatus)
    assert type(value) is ExitStatus and value is ExitStatus.SUBMITTED
    assert type(unstructure({"s": ExitStatus.SUBMITTED})["s"]) is str
    with pytest.raises(ValueError, match="must be one of"):
        record_converter.structure("nope", ExitStatus)

"""The pack as a whole: registration without JAX, specs, starter copies, pins, and
the grader's checks of the submission's files (which need no JAX)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from rl_testlib import PACK, SHARED_STARTER_DIR, TASK_DIRS, TASKS

from rgym_core import load_task
from rgym_core.testing import EvalFolder

SHARED_STARTER = ["evaluate.py", "src/train.py", "src/ppo.py", "src/networks.py",
                  "src/distributions.py", "src/helpers.py"]


def test_plugin_registers_three_tasks_without_importing_jax() -> None:
    code = ("import sys, rgym_task_rl.plugin as p; tasks = p.rgym_register_tasks(); "
            "print(sorted(t.id for t in tasks)); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('jax', 'jaxlib', 'flax', 'optax', 'gymnax', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ids, heavy = out.stdout.splitlines()
    assert ids == str(["mlgym/breakout-minatar", "mlgym/meta-maze", "mlgym/mountain-car-continuous"])
    assert heavy == "[]"


@pytest.mark.parametrize("env_name", sorted(TASK_DIRS))
def test_task_spec_profiles_and_grader(env_name: str) -> None:
    task = load_task(TASK_DIRS[env_name])
    assert task.primary_metric.name == "Reward Mean"
    assert task.grader.location == "sandbox"
    assert task.default_profile == "cpu" and set(task.profiles) == {"cpu", "mlgym"}
    cpu, mlgym = task.with_profile("cpu"), task.with_profile("mlgym")
    assert "Reward Mean" in cpu.baseline_scores, "the cpu baseline is measured and recorded"
    assert mlgym.reference_scores["Reward Mean"] > 10   # MLGym's published baseline
    # trained at full size on CPU: Breakout and Mountain Car under MLGym's figures (Mountain
    # Car's seeds never found the flag), Meta Maze above it
    if env_name == "Breakout-MinAtar":
        assert 15 < mlgym.baseline_scores["Reward Mean"] < mlgym.reference_scores["Reward Mean"]
    if env_name == "MetaMaze-misc":
        assert mlgym.baseline_scores["Reward Mean"] > mlgym.reference_scores["Reward Mean"]
    if env_name == "MountainCarContinuous-v0":
        assert -30 < mlgym.baseline_scores["Reward Mean"] < 0
    assert 0 < mlgym.baseline.tolerance_for("Reward Mean") < 1
    assert env_name in task.description
    config = (TASK_DIRS[env_name] / "starter" / "config.yaml").read_text()
    assert f"env_name: {env_name}" in config and "profiles:" in config


def test_every_task_starts_from_the_shared_ppo_and_its_own_config(tmp_path: Path) -> None:
    """The workspace of each task holds the shared PPO code and that task's config.yaml."""
    from rgym_core.datasets import workspace_starter

    for env_name, task_dir in TASK_DIRS.items():
        assert sorted(p.name for p in (task_dir / "starter").iterdir()) == ["config.yaml"]
        with workspace_starter(load_task(task_dir), {}) as folder:
            assert folder is not None
            files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                           if p.is_file() and "__pycache__" not in p.parts)
            assert files == sorted(["config.yaml", *SHARED_STARTER])
            assert f"env_name: {env_name}" in (folder / "config.yaml").read_text()
            assert (folder / "src" / "ppo.py").read_bytes() == (SHARED_STARTER_DIR / "src" / "ppo.py").read_bytes()


def test_pinned_requirements_agree_everywhere() -> None:
    import rgym_task_rl

    project = tomllib.loads((PACK / "pyproject.toml").read_text())["project"]
    pins = set(rgym_task_rl.REQUIREMENTS)
    assert pins <= set(project["dependencies"])
    for task_dir in TASK_DIRS.values():
        assert set(load_task(task_dir).resources.requirements) == pins
    assert any(p.startswith("jax==") for p in pins) and not any("tensorflow" in p for p in pins)


def test_check_pack_passes_fast() -> None:
    out = subprocess.run([sys.executable, "-m", "rgym_core.cli", "check-pack", str(PACK), "--fast"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _grade_files(tmp_path: Path, files: dict) -> dict:
    folder = EvalFolder.for_task(tmp_path / "eval", TASK_DIRS["Breakout-MinAtar"], files)
    run = folder.run(timeout=120)
    assert run.returncode == 0, run.output
    return run.scores


CONFIG = "env_name: Breakout-MinAtar\ntrain: {}\nnetwork: {}\n"


@pytest.mark.parametrize("files, missing, message", [
    ({}, True, "config.yaml is missing"),
    ({"config.yaml": CONFIG}, True, "checkpoints/ is missing"),
    ({"config.yaml": CONFIG, "checkpoints/notes.txt": "x"}, True, "found no checkpoint"),
    ({"config.yaml": CONFIG, **{f"checkpoints/c-{i}.msgpack": b"x" for i in range(4)}}, False,
     "found 4 checkpoints"),
    ({"config.yaml": CONFIG, **{f"checkpoints/c-{i}.msgpack": b"x" for i in range(6)}}, False,
     "found 6 checkpoints"),
    ({"config.yaml": CONFIG, **{f"checkpoints/c-{i}.pkl": b"x" for i in range(5)}}, True,
     "other files there: c-0.pkl"),
], ids=["no-config", "no-checkpoints", "empty", "four", "six", "pickles"])
def test_grader_names_what_is_missing_or_extra(tmp_path: Path, files: dict, missing: bool,
                                               message: str) -> None:
    scores = _grade_files(tmp_path, files)
    assert message in scores["error"], scores
    assert scores.get("missing_submission", False) is missing
    assert "scores" not in scores
    json.dumps(scores)


def test_no_grader_file_is_a_starter_file() -> None:
    starter = {p.name for folder in [SHARED_STARTER_DIR, *(d / "starter" for d in TASK_DIRS.values())]
               for p in folder.rglob("*")}
    grader = {p.name for p in (TASKS / "_shared" / "rl_grader").iterdir()} - {"__pycache__"}
    assert not (grader & starter) - {"evaluate.py"}
    for d in TASK_DIRS.values():
        assert (d / "grader" / "evaluate.py").read_text() != (SHARED_STARTER_DIR / "evaluate.py").read_text()


def test_wheel_ships_every_task_file(tmp_path: Path) -> None:
    """The built wheel holds each task's spec, starter and grader, the shared grader
    files, and no test or cache file."""
    import zipfile

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--quiet", "-w", str(tmp_path), str(PACK)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("rgym_task_rl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for task in TASK_DIRS.values():
        for rel in ["task.yaml", "grader/evaluate.py", "starter/config.yaml"]:
            assert f"rgym_task_rl/tasks/{task.name}/{rel}" in names, rel
    for name in SHARED_STARTER:
        assert f"rgym_task_rl/tasks/_shared/ppo_starter/{name}" in names, name
    for name in ["rl_grading.py", "policy_worker.py", "wire.py"]:
        assert f"rgym_task_rl/tasks/_shared/rl_grader/{name}" in names
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n]

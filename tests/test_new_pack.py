"""`rgym new-pack NAME` writes a pack that works as written: pip-installed into a
throwaway venv its task is listed, `rgym check-pack` (which runs the baseline of
each profile) passes, and its own tests (on rgym_core.testing) pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgym_core.testing import run_cli, run_json
from rgym_core.testing.venvs import ChildEnv


def test_new_pack_installs_checks_and_tests(tmp_path: Path) -> None:
    made = run_cli("new-pack", "my-tasks", "--task", "fit-line", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    pack = tmp_path / "rgym-task-my-tasks"
    assert (pack / "rgym_task_my_tasks" / "tasks" / "fit-line" / "task.yaml").is_file()
    with ChildEnv.temporary() as env:  # episodes run in it: not under pytest's private /tmp
        env.pip("install", "--no-deps", "--no-build-isolation", str(pack))
        _check_installed(env, pack, tmp_path)


def _check_installed(env: ChildEnv, pack: Path, tmp_path: Path) -> None:
    rows = {r["name"]: r for r in run_json("list", "tasks", python=env.python, cwd=tmp_path)}
    assert rows["my-tasks/fit-line"]["distribution"] == "rgym-task-my-tasks"
    assert rows["my-tasks/fit-line"]["profiles"] == ["quick", "full"]
    checked = run_cli("check-pack", str(pack), python=env.python, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "[profile quick]: baseline mae: measured" in checked.stdout
    assert "[profile full]: baseline mae: measured" in checked.stdout
    tests = env.run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(pack / "tests"), cwd=tmp_path,
                    timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout


def test_new_pack_refuses_bad_names_and_existing_folders(tmp_path: Path) -> None:
    bad = run_cli("new-pack", "My Tasks", cwd=tmp_path)
    assert bad.returncode == 2 and "lower-case letters" in bad.stderr
    (tmp_path / "rgym-task-x").mkdir()
    (tmp_path / "rgym-task-x" / "keep.txt").write_text("mine")
    taken = run_cli("new-pack", "x", cwd=tmp_path)
    assert taken.returncode == 2 and "not empty" in taken.stderr


@pytest.mark.parametrize("edit", ["drop-name", "two-primaries", "wrong-baseline", "raising-grader",
                                  "slow-baseline"])
def test_check_pack_catches_what_it_promises(tmp_path: Path, edit: str) -> None:
    """check-pack's own checks, on a fresh skeleton broken one way at a time."""
    assert run_cli("new-pack", "p", cwd=tmp_path).returncode == 0
    task = tmp_path / "rgym-task-p" / "rgym_task_p" / "tasks" / "example"
    spec = (task / "task.yaml").read_text()
    if edit == "drop-name":
        (task / "task.yaml").write_text(spec.replace("name: Predict y from x\n", ""))
        expected = "'name' is missing"
    elif edit == "two-primaries":
        (task / "task.yaml").write_text(spec.replace(
            "metrics:\n", "metrics:\n  - {name: rmse, direction: minimize, primary: true}\n"))
        expected = "metrics: must have exactly one entry with 'primary: true'"
    elif edit == "wrong-baseline":
        (task / "task.yaml").write_text(spec.replace("    mae: ", "    mae: 1"))
        expected = "more than the tolerance"
    elif edit == "raising-grader":
        (task / "grader" / "evaluate.py").write_text("raise RuntimeError('grader bug')\n")
        expected = "the grader gave no valid score for the baseline"
    else:
        (task / "task.yaml").write_text(spec.replace("command: python solve.py", "command: sleep 60").replace(
            "budget: {max_steps: 10, time_limit_s: 600}",
            "budget: {max_steps: 10, time_limit_s: 600, action_timeout_s: 2}"))
        expected = "the baseline command timed out after"
    fast = edit in ("drop-name", "two-primaries")
    proc = run_cli("check-pack", str(tmp_path / "rgym-task-p"), "--profile", "quick",
                   *(["--fast"] if fast else []), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert expected in proc.stdout.replace("\n", " "), proc.stdout


def test_check_pack_skips_a_profile_that_needs_a_gpu(tmp_path: Path) -> None:
    assert run_cli("new-pack", "g", cwd=tmp_path).returncode == 0
    task = tmp_path / "rgym-task-g" / "rgym_task_g" / "tasks" / "example" / "task.yaml"
    task.write_text(task.read_text().replace("    budget: {max_steps: 50, time_limit_s: 3600}",
                                             "    budget: {max_steps: 50, time_limit_s: 3600}\n"
                                             "    resources: {gpus: 8}"))
    proc = run_cli("check-pack", str(tmp_path / "rgym-task-g"), "--profile", "full", cwd=tmp_path,
                   env={"PATH": "/usr/bin:/bin"})  # no nvidia-smi: no GPU
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "baseline not run: it needs 8 GPU(s) and this machine has 0" in proc.stdout.replace("\n", " ")

"""The runner with a pip-installed test pack, through the CLI as a user runs it:

* lifecycle observers called through pluggy (a subset of arguments, a wrapper,
  a broken observer that stops neither the others nor the episode);
* task profiles: ``RGYM_PROFILE`` in the agent's shell and the grader, the
  profile in ``config.json`` and ``result.json``, (task, profile) in ``rgym score``;
* SIGINT during the grading of a submission: recorded as ``ungraded``, graded
  later by ``rgym grade RUN_DIR`` from ``workspace.tar.gz``.

The pack is generated here and installed with ``pip install --target`` into a
folder that the subprocesses see through ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from rgym_core.rundir import RunDir, iter_run_dirs
from rgym_core.testing.venvs import clean_env

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rgym-runner-testpack"
version = "0.1"

[project.entry-points.rgym]
test-observer = "rgym_runner_testpack.observer"
test-wrapper = "rgym_runner_testpack.wrapper"
test-broken = "rgym_runner_testpack.broken"
test-tasks = "rgym_runner_testpack.tasks"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
rgym_runner_testpack = ["tasks/*/*", "tasks/*/*/*"]
"""

OBSERVER = '''
"""An observer that names only the arguments it uses (pluggy's contract)."""
import os
from rgym_core import hookimpl

def _log(line):
    with open(os.environ["RGYM_TEST_OBSERVER_LOG"], "a") as fh:
        fh.write(line + "\\n")

@hookimpl
def rgym_episode_start(episode):
    _log(f"start {episode.task.id} profile={episode.task.profile}")

@hookimpl
def rgym_step(step):
    _log(f"step {step.index} {step.action.tool}")

@hookimpl
def rgym_episode_end(result):
    _log(f"end {result.status}")
    result.extras["observer"] = {"steps": result.steps}  # a plugin's summary in result.json
'''

WRAPPER = '''
"""A new-style wrapper around every other rgym_step implementation."""
import os
from rgym_core import hookimpl

@hookimpl(wrapper=True)
def rgym_step(step):
    with open(os.environ["RGYM_TEST_OBSERVER_LOG"], "a") as fh:
        fh.write(f"wrap-in {step.index}\\n")
    result = yield
    with open(os.environ["RGYM_TEST_OBSERVER_LOG"], "a") as fh:
        fh.write(f"wrap-out {step.index}\\n")
    return result
'''

BROKEN = '''
"""Observers that raise: they must stop neither the others nor the episode."""
from rgym_core import hookimpl

@hookimpl(tryfirst=True)
def rgym_episode_start():
    raise RuntimeError("broken start observer")

@hookimpl
def rgym_step(episode, step):
    raise RuntimeError(f"observer bug at step {step.index}")
'''

TASKS = '''
from rgym_core import hookimpl, load_task, package_path

@hookimpl
def rgym_register_tasks():
    return [load_task(package_path("rgym_runner_testpack", "tasks", "gated"))]
'''

TASK_YAML = """\
id: runnertest/gated
name: Gated grader
description: Write a number to answer.txt; the score is that number.
metrics: [{name: score, direction: maximize}]
baseline: {scores: {score: 1.0}}
reference_scores: {score: 10.0}
budget: {max_steps: 10, time_limit_s: 300, action_timeout_s: 60}
grader: {entry: evaluate.py, timeout_s: 120}
default_profile: quick
profiles:
  quick:
    description: the default
  other:
    description: another size
    env: {PROFILE_NOTE: other-size}
scripted_actions:
  - tool: bash
    args: {command: 'echo "profile=$RGYM_PROFILE note=${PROFILE_NOTE:-none}"; echo 7 > answer.txt'}
  - tool: submit
"""

GRADER = '''
"""Scores answer.txt; waits while the gate file exists (so a test can interrupt it)."""
import json, os, time
from pathlib import Path

GATE = {gate!r}
deadline = time.monotonic() + 90
while os.path.exists(GATE) and time.monotonic() < deadline:
    time.sleep(0.05)
answer = Path(os.environ["RGYM_SUBMISSION_DIR"]) / "answer.txt"
out = Path(os.environ["RGYM_SCORES_FILE"])
if not answer.is_file():
    out.write_text(json.dumps({{"error": "answer.txt is missing", "missing_submission": True}}))
else:
    out.write_text(json.dumps({{"scores": {{"score": float(answer.read_text())}},
                               "details": {{"profile": os.environ.get("RGYM_PROFILE"),
                                           "note": os.environ.get("PROFILE_NOTE")}}}}))
'''


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build and pip-install the test pack; returns its site folder and gate path."""
    root = tmp_path_factory.mktemp("testpack")
    # The grader runs confined (its own /tmp, only the interpreter's files of the host): the
    # gate lives beside the interpreter, the one host folder it sees.
    gate = Path(sys.prefix) / f".rgym-test-gate-{os.getpid()}-{root.name}"
    src = root / "src" / "src" / "rgym_runner_testpack"
    task = src / "tasks" / "gated"
    (task / "grader").mkdir(parents=True)
    (task / "starter").mkdir()
    (root / "src" / "pyproject.toml").write_text(PYPROJECT)
    (src / "__init__.py").write_text("")
    (src / "observer.py").write_text(OBSERVER)
    (src / "wrapper.py").write_text(WRAPPER)
    (src / "broken.py").write_text(BROKEN)
    (src / "tasks.py").write_text(TASKS)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "grader" / "evaluate.py").write_text(GRADER.format(gate=str(gate)))
    (task / "starter" / "README.md").write_text("Write a number to answer.txt.\n")
    site = root / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(site),
                           str(root / "src")], capture_output=True, text=True, timeout=300,
                          env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"site": site, "gate": gate, "log": root / "observer.log"}


def rgym(pack: dict[str, Path], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=timeout, env=_env(pack))


def _env(pack: dict[str, Path]) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(pack["site"]), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "RGYM_TEST_OBSERVER_LOG": str(pack["log"])}


def _only_run(runs: Path) -> RunDir:
    found = list(iter_run_dirs(runs))
    assert len(found) == 1, found
    return found[0]


def test_observers_through_pluggy_subset_arguments_wrapper_and_isolation(pack, tmp_path):
    pack["log"].unlink(missing_ok=True)
    runs = tmp_path / "runs"
    proc = rgym(pack, "run", "runnertest/gated", "--runs-dir", str(runs), "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _only_run(runs)
    assert run.result().status == "submitted"
    assert run.result().extras["observer"] == {"steps": 2}  # (other installed plugins add theirs)
    log = pack["log"].read_text().splitlines()
    # the observer that names only `step` ran at every step, inside the wrapper
    assert log == ["start runnertest/gated profile=quick",
                   "wrap-in 1", "step 1 bash", "wrap-out 1",
                   "wrap-in 2", "step 2 submit", "wrap-out 2",
                   "end submitted"]
    errors = [r for r in run.records() if r["type"] == "hook_error"]
    assert {(e["hook"], e["plugin"]) for e in errors} == {
        ("rgym_episode_start", "test-broken"), ("rgym_step", "test-broken")}
    assert any("observer bug at step 2" in e["error"] for e in errors)


def test_profiles_reach_the_agent_the_grader_and_the_records(pack, tmp_path):
    runs = tmp_path / "runs"
    for profile in ("other", None):
        args = ["run", "runnertest/gated", "--runs-dir", str(runs), "-q", "--seed", "1"]
        proc = rgym(pack, *args, *(["--profile", profile] if profile else []))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    by_profile = {r.result().profile: r for r in iter_run_dirs(runs)}
    assert set(by_profile) == {"other", "quick"}  # None resolved to the default profile
    other = by_profile["other"]
    assert other.config()["profile"] == "other"
    assert "@other" in other.path.parent.parent.name  # runs/<task>@<profile>/<solver>/<run>
    shell = other.steps()[0].observation.output
    assert "profile=other note=other-size" in shell
    assert "profile=quick note=none" in by_profile["quick"].steps()[0].observation.output
    final = other.result().scores[-1]
    assert (final.details["profile"], final.details["note"]) == ("other", "other-size")
    proc = rgym(pack, "score", str(runs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert sorted(t["task"] for t in data["tasks"]) == ["runnertest/gated@other",
                                                       "runnertest/gated@quick"]


def test_sigint_during_grading_keeps_the_submission_for_rgym_grade(pack, tmp_path):
    runs = tmp_path / "runs"
    pack["gate"].write_text("closed")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", "run", "runnertest/gated",
                                 "--runs-dir", str(runs), "-q"], cwd=REPO, env=_env(pack),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        run: RunDir | None = None
        while time.monotonic() < deadline:
            found = list(runs.rglob("trajectory.jsonl")) if runs.exists() else []
            if found and '"tool": "submit"' in found[0].read_text():
                run = RunDir(found[0].parent)
                break
            time.sleep(0.05)
        assert run is not None, "the episode never submitted"
        time.sleep(0.5)  # the grader is now waiting at the gate
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        pack["gate"].unlink(missing_ok=True)
    assert proc.returncode in (1, 130), out + err
    result = run.result()
    assert result.status == "ungraded" and result.end_reason == "submit"
    assert "rgym grade" in (result.error or "")
    assert run.archive_path.is_file()
    assert any(r["type"] == "grading_interrupted" for r in run.records())

    graded = rgym(pack, "grade", str(runs))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert f"graded: {run.path}" in graded.stdout
    result = run.result()
    assert result.status == "submitted" and result.final_scores == {"score": 7.0}
    records = list(run.records())
    assert records[-1]["type"] == "end" and records[-1]["result"]["status"] == "submitted"
    again = rgym(pack, "grade", str(runs))
    assert again.returncode == 0 and "nothing to grade" in again.stderr

"""Episodes end to end: the CLI as a user runs it, budgets, errors, signals, isolation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from rgym_core import Action, BudgetExceeded, Observation, TaskContext, Usage, hookimpl
from rgym_core.records import ExitStatus
from rgym_core.registry import load_registry
from rgym_core.rundir import iter_records, read_result
from rgym_core.runner import RunConfig, RunError, run_episode
from rgym_core.testing import run_cli

is_root = os.geteuid() == 0


def only_run_dir(runs_dir: Path) -> Path:
    found = [p.parent for p in runs_dir.rglob("trajectory.jsonl")]
    assert len(found) == 1, found
    return found[0]


def write_script(tmp_path: Path, actions: list[dict[str, Any]]) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(actions))
    return path


class ListAgent:
    """An in-process agent returning given actions (or raising given exceptions)."""

    def __init__(self, *items: Any) -> None:
        self.items = list(items)
        self.observations: list[Observation] = []
        self.context: TaskContext | None = None

    def start(self, context: TaskContext) -> None:
        self.context = context

    def act(self, observation: Observation) -> Action:
        self.observations.append(observation)
        item = self.items.pop(0) if self.items else Action(tool="submit")
        if isinstance(item, BaseException):
            raise item
        return item


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry()


def run_with(registry, runs_dir: Path, agent: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
    return run_episode(RunConfig(task="rgym/demo", runs_dir=runs_dir, **kwargs), registry, agent=agent)


def test_cli_run_demo_prints_score_and_run_dir(runs_dir: Path) -> None:
    proc = run_cli("run", "rgym/demo", "--agent", "scripted", "--runs-dir", str(runs_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted" in proc.stdout
    assert "score: r2 = 0.9" in proc.stdout
    run_dir = only_run_dir(runs_dir)
    assert str(run_dir) in proc.stdout.replace("\n", "")
    for name in ("config.json", "trajectory.jsonl", "result.json", "workspace.tar.gz"):
        assert (run_dir / name).is_file(), name
    result = read_result(run_dir)
    assert result.status is ExitStatus.SUBMITTED
    assert [s.kind for s in result.scores] == ["validate", "validate", "submit"]
    assert result.scores[0].scores["r2"] < result.scores[1].scores["r2"]
    kinds = [r["type"] for r in iter_records(run_dir)]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("step") == 5
    with tarfile.open(run_dir / "workspace.tar.gz") as tar:
        names = tar.getnames()
    assert "workspace/submission.csv" in names
    assert not any(n.startswith("workspace/data") for n in names)  # datasets are not archived
    assert list((run_dir / "grader").glob("*-submit.json"))


def test_cli_json_output_and_exit_codes(runs_dir: Path) -> None:
    proc = run_cli("run", "demo", "--runs-dir", str(runs_dir), "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["status"] == "submitted" and data["final_scores"]["r2"] > 0.9
    bad = run_cli("run", "no/such-task", "--runs-dir", str(runs_dir))
    assert bad.returncode == 2
    assert "unknown task 'no/such-task'" in bad.stderr and "Traceback" not in bad.stderr


def test_baseline_command_reproduces_recorded_baseline(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(Action.bash("python baseline.py"), Action(tool="submit"))
    result = run_with(registry, runs_dir, agent)
    task = registry.task("rgym/demo")
    assert result.final_scores == pytest.approx(task.baseline_scores, abs=1e-9)


def test_max_steps_autosubmits_and_grades(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(*[Action.bash("python baseline.py")] * 10)
    result = run_with(registry, runs_dir, agent, max_steps=3)
    assert result.status is ExitStatus.AUTOSUBMITTED_MAX_STEPS
    assert result.steps == 3
    assert result.scores[-1].kind == "autosubmit" and result.final_scores is not None


def test_time_limit_autosubmits(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(Action.bash("python baseline.py"), Action.bash("sleep 5"), Action.bash("sleep 5"))
    result = run_with(registry, runs_dir, agent, time_limit_s=1.5)
    assert result.status is ExitStatus.AUTOSUBMITTED_TIME
    assert result.final_scores is not None
    assert result.duration_s < 6


def test_missing_submission_status(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_with(registry, runs_dir, ListAgent(Action(tool="submit")))
    assert result.status is ExitStatus.SUBMISSION_MISSING
    assert "submission.csv not found" in (result.error or "")


def test_agent_crash_autosubmits(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(Action.bash("python baseline.py"), ValueError("model exploded"))
    result = run_with(registry, runs_dir, agent)
    assert result.status is ExitStatus.AUTOSUBMITTED_AGENT_ERROR
    assert "model exploded" in (result.agent_error or "")
    assert result.end_reason == "agent_error"
    assert result.final_scores is not None


def test_cost_limit_stops_before_crossing(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(Action.bash("python baseline.py", usage=Usage(cost_usd=0.4)),
                      BudgetExceeded("cost", "next call would cross the limit"))
    result = run_with(registry, runs_dir, agent, cost_limit_usd=0.5)
    assert result.status is ExitStatus.AUTOSUBMITTED_COST
    assert result.cost_usd == pytest.approx(0.4)


def test_unknown_tool_and_bad_arguments_are_observations(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = ListAgent(Action(tool="teleport"), Action(tool="bash", args={}), Action(tool="submit"))
    run_with(registry, runs_dir, agent)
    first, second = agent.observations[1], agent.observations[2]
    assert first.error and "Unknown tool 'teleport'" in first.output and "bash" in first.output
    assert second.error and "missing argument 'command'" in second.output


def test_agent_written_score_file_is_never_trusted(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    fake = json.dumps({"scores": {"r2": 1.0, "rmse": 0.0}})
    agent = ListAgent(Action.bash("python baseline.py"),
                      Action.bash(f"echo '{fake}' > scores.json; mkdir -p grader; "
                                  f"echo 'raise SystemExit' > grader/evaluate.py"),
                      Action(tool="submit"))
    result = run_with(registry, runs_dir, agent)
    assert result.final_scores is not None and result.final_scores["r2"] < 0.99


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def rgym_episode_start(self, episode):  # type: ignore[no-untyped-def]
        self.events.append(f"start:{episode.task.id}")

    @hookimpl
    def rgym_step(self, episode, step):  # type: ignore[no-untyped-def]
        self.events.append(f"step:{step.index}:{step.action.tool}")

    @hookimpl
    def rgym_episode_end(self, episode, result):  # type: ignore[no-untyped-def]
        self.events.append(f"end:{result.status.value}")


class BrokenObserver:
    @hookimpl
    def rgym_step(self, episode, step):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer bug")


def test_lifecycle_hooks_are_plugins(runs_dir: Path) -> None:
    recorder = Recorder()
    reg = load_registry(extra_plugins=[("recorder", recorder), ("broken-observer", BrokenObserver())])
    result = run_with(reg, runs_dir, ListAgent(Action.bash("python baseline.py"), Action(tool="submit")))
    assert result.status is ExitStatus.SUBMITTED
    assert recorder.events == ["start:rgym/demo", "step:1:bash", "step:2:submit", "end:submitted"]
    errors = [r for r in iter_records(Path(result.run_dir)) if r["type"] == "hook_error"]
    assert errors and "observer bug" in errors[0]["error"]


def test_dataset_override_must_have_same_form(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RunError, match="mount"):
        run_with(registry, runs_dir, ListAgent(), datasets={"nope": "rgym/demo-points"})


@pytest.mark.skipif(not is_root, reason="the local sandbox drops privileges only when rgym runs as root")
def test_agent_cannot_read_hidden_files_or_change_datasets(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    task = registry.task("rgym/demo")
    answers = task.root / "grader" / "answers.csv"
    agent = ListAgent(
        Action.bash(f"cat {answers}"),
        Action.bash("echo 1,2 >> data/train.csv"),
        Action.bash("chmod 666 data/train.csv"),
        Action.bash("rm -f data/train.csv"),
        Action.bash("sha256sum data/train.csv"),
        Action(tool="submit"),
    )
    run_with(registry, runs_dir, agent)
    outputs = [o.output for o in agent.observations[1:]]
    assert "Permission denied" in outputs[0] or "No such file or directory" in outputs[0]
    assert "x,y" not in outputs[0]
    denied = ("Permission denied", "not permitted", "Read-only file system")
    for output in outputs[1:4]:  # append, chmod, rm: refused (by permissions or a read-only mount)
        assert any(word in output for word in denied), output
    assert "8f70fbea856a4e34a602edb63db189412150ae6301f99a7d09813790fea78065" in outputs[4]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_episode_leaves_trajectory_and_cancelled_result(
        tmp_path: Path, runs_dir: Path, sig: signal.Signals) -> None:
    marker = f"sleep 60.{os.getpid()}{int(sig)}"  # unique, so other processes cannot match
    script = write_script(tmp_path, [{"tool": "bash", "args": {"command": "echo first"}},
                                     {"tool": "bash", "args": {"command": marker}}])
    proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--runs-dir",
                             str(runs_dir), "--agent-option", f"script={script}", "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        trajectories = list(runs_dir.rglob("trajectory.jsonl"))
        if trajectories and '"type": "step"' in trajectories[0].read_text():
            break
        time.sleep(0.05)
    time.sleep(0.3)  # let the second action start
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    run_dir = only_run_dir(runs_dir)
    records = list(iter_records(run_dir))
    assert records[-1]["type"] == "end"
    assert records[-1]["result"]["status"] == "cancelled"
    assert any(r["type"] == "step" and "first" in r["step"]["observation"]["output"] for r in records)
    assert read_result(run_dir).status is ExitStatus.CANCELLED
    leftover = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""


class AsyncAgent:
    """An async agent holding a loop-bound object from start() into act()."""

    def __init__(self) -> None:
        self.loops: list[object] = []
        self.queue: Any = None
        self.closed = False

    async def start(self, context: TaskContext) -> None:
        import asyncio

        self.queue = asyncio.Queue()
        for action in (Action.bash("python baseline.py"), Action(tool="submit")):
            self.queue.put_nowait(action)
        self.loops.append(asyncio.get_running_loop())

    async def act(self, observation: Observation) -> Action:
        import asyncio

        self.loops.append(asyncio.get_running_loop())
        return await asyncio.wait_for(self.queue.get(), timeout=5)

    async def close(self) -> None:
        self.closed = True


def test_async_agent_keeps_one_event_loop_per_episode(registry, runs_dir: Path) -> None:  # type: ignore[no-untyped-def]
    agent = AsyncAgent()
    result = run_with(registry, runs_dir, agent)
    assert result.status is ExitStatus.SUBMITTED, result.error
    assert len(agent.loops) == 3 and len(set(map(id, agent.loops))) == 1
    assert agent.closed and agent.loops[0].is_closed()  # type: ignore[attr-defined]

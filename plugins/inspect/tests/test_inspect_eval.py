"""``inspect eval`` on an rgym task: the real Inspect, its ``mockllm/model``, and each
sample a real rgym episode (``mlgym/prisoners-dilemma``: a few seconds each): rgym's
sandbox, step loop, budgets, final grading and integrity monitor, with a run directory."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

from inspect_ai.log import read_eval_log

from rgym_core.testing import run_json

TASK = "mlgym/prisoners-dilemma"
DEFECT = "def row_strategy(history):\n    return 1\n"
COOPERATE = "def row_strategy(history):\n    return 0\n"


def _only_log(folder: Path):
    logs = sorted(folder.glob("*.eval"))
    assert len(logs) == 1, logs
    return read_eval_log(str(logs[0]))


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


def _archived(run_dir: Path, name: str) -> str:
    with tarfile.open(run_dir / "workspace.tar.gz") as tar:
        data = tar.extractfile(f"workspace/{name}")
        assert data is not None
        return data.read().decode()


def _check_episode_score(score: Any, runs: Path) -> tuple[Path, dict[str, Any]]:
    """The Inspect score is the rgym episode's: its run directory under ``runs``, its
    result's final score, its integrity verdict; returns the run directory and result."""
    meta = score.metadata
    assert meta["valid"] and meta["primary_metric"] == "Score" and meta["error"] is None, meta
    assert meta["grader_secret"], meta  # the machine's grader secret, by id
    run_dir = Path(meta["run_dir"])
    assert runs in run_dir.parents
    result = json.loads((run_dir / "result.json").read_text())
    assert result["agent"] == "InspectAgent" and result["model"] == "mockllm/model"
    assert score.value == result["final_scores"]["Score"] == meta["scores"]["Score"]
    assert meta["integrity"] == result["extras"]["integrity"] and meta["integrity"]["flagged"] is False
    assert (run_dir / "integrity.json").is_file()
    return run_dir, result


def test_inspect_eval_cli_scores_with_an_rgym_episode(tmp_path: Path, inspect_env: dict[str, str]) -> None:
    """A model that calls no tool: the episode submits the starter when the scorer runs;
    its run directory goes to rgym's default runs folder, ``runs``."""
    done = subprocess.run(
        [sys.executable, "-m", "inspect_ai", "eval", "rgym_inspect/rgym_task", "-T", f"task={TASK}",
         "--model", "mockllm/model", "--log-dir", str(tmp_path / "logs")],
        env=inspect_env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = _only_log(tmp_path / "logs")
    assert log.status == "success"
    assert log.eval.task == f"rgym/{TASK}"  # as `rgym export inspect` names it
    assert log.eval.sandbox is not None and log.eval.sandbox.type == "rgym"
    sample = log.samples[0]
    assert sample.limit is not None and sample.limit.type == "turn"  # the task's max_steps
    score = sample.scores["rgym_scorer"]
    run_dir, result = _check_episode_score(score, tmp_path / "runs")
    assert result["steps"] == 1 and result["end_reason"] == "submit"  # the submission alone
    assert score.metadata["direction"] == "maximize"
    assert _archived(run_dir, "strategy.py") != DEFECT  # the starter's strategy was graded
    assert log.results.scores[0].metrics["mean"].value == score.value


SCRIPT = textwrap.dedent('''
    import json, sys
    from inspect_ai import eval
    from inspect_ai.model import ModelOutput, get_model
    from rgym_inspect.tasks import rgym_task

    commands, task, logs, runs = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    outputs = [ModelOutput.for_tool_call("mockllm/model", "bash", {"command": c}) for c in commands]
    outputs.append(ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "done"}))
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = eval(rgym_task(task=task, runs_dir=runs), model=model, log_dir=logs)
    print(log.location)
''')


def _scripted(tmp_path: Path, env: dict[str, str], commands: list[str]):
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(commands), TASK, str(tmp_path / "logs"),
                           str(tmp_path / "runs")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return _only_log(tmp_path / "logs").samples[0]


def test_model_tool_calls_are_the_steps_of_an_rgym_episode(tmp_path: Path, inspect_env: dict[str, str]) -> None:
    """The model's ``bash()`` calls are the episode's ``bash`` steps, in its workspace
    and its trajectory; the submission is graded by the episode's final grading."""
    write = f"cat > strategy.py <<'PY'\n{DEFECT}PY\ntest -f strategy.py && ls"
    sample = _scripted(tmp_path, inspect_env, [write, "pwd; ls"])
    tools = [m for m in sample.messages if m.role == "tool"]
    assert "strategy.py" in tools[0].text and tools[0].error is None
    assert "strategy.py" in tools[1].text and str(tmp_path) not in tools[1].text.splitlines()[0]
    run_dir, result = _check_episode_score(sample.scores["rgym_scorer"], tmp_path / "runs")
    steps = [r["step"] for r in _records(run_dir) if r["type"] == "step"]
    assert [s["action"]["tool"] for s in steps] == ["bash", "bash", "submit"]
    assert "cat > strategy.py" in steps[0]["action"]["args"]["command"]
    assert "pwd; ls" in steps[1]["action"]["args"]["command"]
    assert steps[1]["observation"]["output"] == tools[1].text
    assert result["steps"] == 3 and result["end_reason"] == "submit" and result["status"] == "submitted"
    assert _archived(run_dir, "strategy.py") == DEFECT


def test_a_late_swap_after_the_last_tool_call_is_not_graded(tmp_path: Path, inspect_env: dict[str, str]) -> None:
    """The model writes one strategy, then leaves a detached process that swaps it for
    another after its last tool call (2 s later, while the grader runs).  The episode kills
    it at the submission and grades the frozen, archived workspace: the swap is never
    graded, and regrading the archive gives the recorded score."""
    write = f"cat > strategy.py <<'PY'\n{DEFECT}PY\ncat > .swap <<'PY'\n{COOPERATE}PY"
    swap = ("setsid nohup sh -c 'sleep 2; for i in $(seq 60); do cp .swap strategy.py; sleep 0.5; done' "
            ">/dev/null 2>&1 < /dev/null & echo started")
    sample = _scripted(tmp_path, inspect_env, [write, swap])
    assert "started" in [m for m in sample.messages if m.role == "tool"][1].text
    run_dir, result = _check_episode_score(sample.scores["rgym_scorer"], tmp_path / "runs")
    killed = [r for r in _records(run_dir) if r["type"] == "processes_killed"]
    assert killed and killed[0]["when"] == "submission", _records(run_dir)
    assert any("sleep" in c or ".swap" in c for c in killed[0]["commands"]), killed
    assert _archived(run_dir, "strategy.py") == DEFECT
    regraded = run_json("grade", "--regrade", str(run_dir))
    assert regraded["action"] == "graded", regraded
    assert regraded["result"]["final_scores"]["Score"] == result["final_scores"]["Score"]
    assert regraded["result"]["scores"][-1]["grader_secret"] == result["scores"][-1]["grader_secret"]


def test_rgym_agent_solver_runs_a_whole_rgym_episode(tmp_path: Path, inspect_env: dict[str, str]) -> None:
    """``--solver rgym_inspect/rgym_agent``: rgym's baseline agent plays an ``rgym run``
    episode; its final grading and integrity verdict are the Inspect score, and the
    unused ``rgym`` sandbox leaves no second episode."""
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "inspect_ai", "eval", "rgym_inspect/rgym_task", "-T", f"task={TASK}",
         "-T", f"runs_dir={runs}", "--solver", "rgym_inspect/rgym_agent", "-S", "agent=baseline",
         "-S", f"runs_dir={runs}", "--model", "mockllm/model", "--log-dir", str(tmp_path / "logs")],
        env=inspect_env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = _only_log(tmp_path / "logs")
    assert log.status == "success" and log.eval.solver == "rgym_inspect/rgym_agent"
    score = log.samples[0].scores["rgym_scorer"]
    meta = score.metadata
    assert meta["valid"] and meta["agent"] == "baseline/baseline" and meta["end_reason"] == "submit"
    assert meta["integrity"]["flagged"] is False and "findings" in meta["integrity"]
    run_dir = Path(meta["run_dir"])
    assert runs in run_dir.parents
    result = json.loads((run_dir / "result.json").read_text())
    assert score.value == result["final_scores"]["Score"]
    assert (run_dir / "integrity.json").is_file()
    assert [p.parent for p in runs.rglob("result.json")] == [run_dir]

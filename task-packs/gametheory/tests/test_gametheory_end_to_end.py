"""End to end through the CLI: `rgym run` with the scripted reference agent on
the local sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rgym_integrity import integrity_problems

from rgym_core import TaskSpec, load_task

PACK = Path(__file__).resolve().parents[1]
PD = PACK / "rgym_task_gametheory" / "tasks" / "prisoners-dilemma"


def rgym(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _near_baseline(score: float, task: TaskSpec) -> bool:
    """``score`` is within the task's recorded baseline tolerance of its baseline."""
    assert task.baseline is not None
    return abs(score - task.baseline_scores["Score"]) <= task.baseline.tolerance_for("Score")


@pytest.mark.slow
def test_scripted_agent_improves_on_the_baseline(tmp_path: Path) -> None:
    out = rgym("run", "mlgym/prisoners-dilemma", "--agent", "scripted", "--runs-dir",
               str(tmp_path / "runs"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "score: Score = " in out.stdout
    (result_file,) = (tmp_path / "runs").rglob("result.json")
    result = json.loads(result_file.read_text())
    assert result["status"] == "submitted"
    assert result["final_scores"]["Score"] > load_task(PD).baseline_scores["Score"] + 0.1


@pytest.mark.slow
def test_workspace_holds_no_opponent_and_the_starter_scores_the_baseline(tmp_path: Path) -> None:
    """A cheating agent looks for the opponent's code in its workspace and finds
    nothing; then it submits the starter strategy, which scores the recorded baseline."""
    script = tmp_path / "cheat.json"
    script.write_text(json.dumps([
        {"tool": "bash", "args": {"command": "ls -A; echo ---; grep -rIl -e _tit_for_two_tats "
                                             "-e 'def opponent' -e target_column . ~ ; echo done"}},
        {"tool": "submit"},
    ]))
    out = rgym("run", "mlgym/prisoners-dilemma", "--agent", "scripted", "--agent-option",
               f"script={script}", "--runs-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    (run_dir,) = {p.parent for p in (tmp_path / "runs").rglob("result.json")}
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    first = next(s["step"] for s in steps if s["type"] == "step")
    listing, found = first["observation"]["output"].split("---", 1)
    assert sorted(listing.split()) == ["evaluate.py", "strategy.py"]
    assert found.split() == ["done"], found
    result = json.loads((run_dir / "result.json").read_text())
    assert _near_baseline(result["final_scores"]["Score"], load_task(PD))


@pytest.mark.parametrize("task", ["prisoners-dilemma", "battle-of-sexes", "blotto"])
def test_baseline_episode_scores_the_baseline_and_is_not_flagged(tmp_path: Path, task: str) -> None:
    """`--agent baseline` runs the task's own baseline and submits it: the recorded
    score, and a clean integrity verdict (no error, warning or review)."""
    out = rgym("run", f"mlgym/{task}", "--agent", "baseline", "--runs-dir", str(tmp_path / "runs"),
               "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "submitted", result.get("error")
    assert _near_baseline(result["final_scores"]["Score"], load_task(PD.parent / task))
    assert integrity_problems(tmp_path / "runs") == []

"""End to end through the CLI: `rgym run mlgym/3sat` with the scripted reference
agent on the local sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rgym_integrity import integrity_problems

from rgym_core import load_task

PACK = Path(__file__).resolve().parents[1]


def rgym(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_scripted_agent_solves_with_fewer_decisions(tmp_path: Path) -> None:
    out = rgym("run", "mlgym/3sat", "--agent", "scripted", "--runs-dir", str(tmp_path / "runs"),
               cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "score: Time = " in out.stdout
    (result_file,) = (tmp_path / "runs").rglob("result.json")
    result = json.loads(result_file.read_text())
    assert result["status"] == "submitted"
    baseline = load_task(PACK / "rgym_task_sat" / "tasks" / "3sat").baseline_scores
    assert result["final_scores"]["Decisions"] < baseline["Decisions"]
    (run_dir,) = {result_file.parent}
    names = {p.name for p in (run_dir / "grader").iterdir()}
    assert any(n.endswith("-submit.json") for n in names)


def test_baseline_episode_scores_the_baseline_and_is_not_flagged(tmp_path: Path) -> None:
    """The starter's own evaluate.py names instances.json (also a grader file) in its
    docstring: running it is no attempt to reach the hidden formulas."""
    out = rgym("run", "mlgym/3sat", "--agent", "baseline", "--runs-dir", str(tmp_path / "runs"),
               cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    (result_file,) = (tmp_path / "runs").rglob("result.json")
    result = json.loads(result_file.read_text())
    assert result["status"] == "submitted"
    baseline = load_task(PACK / "rgym_task_sat" / "tasks" / "3sat").baseline_scores
    assert result["final_scores"]["Decisions"] == baseline["Decisions"]
    assert integrity_problems(tmp_path / "runs") == []

"""The baseline agent: its plan, and an episode that reproduces the recorded baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rgym_agent_baseline import BaselineAgent

from rgym_core.agents import AgentConfig, EpisodeStatus, TaskContext
from rgym_core.records import Observation
from rgym_core.specs import Budget
from rgym_core.tools import ToolSchema

REPO = Path(__file__).resolve().parents[3]


def context(command: str | None) -> TaskContext:
    budget = Budget()
    tools = [ToolSchema(name=n, description=n) for n in ("bash", "validate", "submit")]
    return TaskContext(task_id="t/t", description="d", tools=tools, budget=budget,
                       status=EpisodeStatus(budget=budget), baseline_command=command)


def plan(agent: BaselineAgent, command: str | None) -> list[tuple[str, dict]]:
    agent.start(context(command))
    return [(a.tool, a.args) for a in (agent.act(Observation(output="")) for _ in range(4))]


def test_runs_the_baseline_command_then_submits() -> None:
    assert plan(BaselineAgent(AgentConfig()), "python baseline.py") == [
        ("bash", {"command": "python baseline.py"}), ("submit", {}), ("submit", {}), ("submit", {})]


def test_without_a_baseline_command_it_submits_the_starter() -> None:
    agent = BaselineAgent(AgentConfig())
    assert plan(agent, None)[0] == ("submit", {})


def test_options_override_the_command_and_add_a_validation() -> None:
    agent = BaselineAgent(AgentConfig(options={"command": "bash run.sh", "validate": "true"}))
    assert [t for t, _ in plan(agent, "python baseline.py")][:3] == ["bash", "validate", "submit"]
    assert plan(agent, None)[0] == ("bash", {"command": "bash run.sh"})


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_rgym_run_with_the_baseline_agent_reproduces_the_recorded_score(tmp_path: Path,
                                                                        isolation: str) -> None:
    """In-process and in its own confined process (``--agent-isolation process``:
    the baseline command reaches the scaffold through the protocol)."""
    done = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--agent",
                           "baseline", "--agent-isolation", isolation, "--runs-dir", str(tmp_path),
                           "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["agent"] == "baseline/baseline" and result["status"] == "submitted"
    metric = result["primary_metric"]
    assert result["baseline_scores"], "the task records no baseline scores"
    for name, recorded in result["baseline_scores"].items():
        assert result["final_scores"][name] == pytest.approx(recorded, abs=1e-4), (metric, name)

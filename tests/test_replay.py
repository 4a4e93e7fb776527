"""The replay agent: reads a saved trajectory and sends its actions again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgym_core.agents import AgentConfig, EpisodeStatus, TaskContext
from rgym_core.records import Action, Observation, ScoreRecord, Step, Usage
from rgym_core.replay import ReplayAgent, load_actions
from rgym_core.serialization import SpecError, unstructure
from rgym_core.specs import Budget
from rgym_core.tools import ToolSchema

RECORDED = [
    Action.bash("ls -a", thought="look around", raw="```\nls -a\n```",
                usage=Usage(cost_usd=0.01, input_tokens=100, output_tokens=10, calls=1),
                llm_calls=[{"prompt": "p", "response": "r"}]),
    Action(tool="edit", args={"start_line": 2, "end_line": 3, "replacement": "x = 1\n"}),
    Action(tool="validate"),
]


def write_trajectory(folder: Path, actions: list[Action], *, torn: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"type": "start", "run_id": "r1", "task": "rgym/demo"})]
    for i, action in enumerate(actions, start=1):
        step = Step(index=i, action=action, observation=Observation(output=f"out {i}"),
                    started_at=1000.0 + i, duration_s=0.1)
        lines.append(json.dumps({"type": "step", "step": unstructure(step)}))
        if action.tool == "validate":
            record = ScoreRecord(step=i, kind="validate", valid=True, scores={"accuracy": 0.5})
            lines.append(json.dumps({"type": "score", "score": unstructure(record)}))
    lines.append(json.dumps({"type": "end", "result": {"status": "submitted"}}))
    text = "\n".join(lines) + "\n"
    if torn:
        text += '{"type": "step", "st'
    (folder / "trajectory.jsonl").write_text(text)
    return folder


def context(names: list[str]) -> TaskContext:
    budget = Budget()
    return TaskContext(task_id="rgym/demo", description="d",
                       tools=[ToolSchema(name=n, description=n) for n in names],
                       budget=budget, status=EpisodeStatus(budget=budget))


def test_replays_the_recorded_actions_then_submits(tmp_path: Path) -> None:
    run_dir = write_trajectory(tmp_path / "run", RECORDED)
    agent = ReplayAgent(AgentConfig(options={"trajectory": str(run_dir)}))
    agent.start(context(["bash", "edit", "validate", "submit"]))
    replayed = [agent.act(Observation(output="")) for _ in range(5)]
    assert [(a.tool, a.args) for a in replayed[:3]] == [(a.tool, a.args) for a in RECORDED]
    assert replayed[0].thought == "look around" and replayed[0].raw == "```\nls -a\n```"
    assert replayed[0].usage == Usage() and replayed[0].llm_calls == []  # a replay spends nothing
    assert [a.tool for a in replayed[3:]] == ["submit", "submit"]
    assert agent.describe()["unknown_tools"] == []


def test_accepts_the_jsonl_path_and_a_torn_last_line(tmp_path: Path) -> None:
    run_dir = write_trajectory(tmp_path / "run", RECORDED, torn=True)
    assert [a.tool for a in load_actions(run_dir / "trajectory.jsonl")] == ["bash", "edit",
                                                                             "validate"]


def test_reports_tools_the_episode_lacks(tmp_path: Path) -> None:
    agent = ReplayAgent(AgentConfig(options={"trajectory": str(write_trajectory(tmp_path, RECORDED))}))
    agent.start(context(["bash", "submit"]))
    assert agent.describe()["unknown_tools"] == ["edit", "validate"]


def test_needs_a_trajectory_option() -> None:
    with pytest.raises(ValueError, match="--agent-option trajectory="):
        ReplayAgent(AgentConfig())


def test_missing_file_and_bad_lines_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="nowhere: .*file not found"):
        load_actions(tmp_path / "nowhere")
    run_dir = write_trajectory(tmp_path / "run", RECORDED)
    path = run_dir / "trajectory.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(SpecError, match=r"trajectory.jsonl: line 2: invalid JSON"):
        load_actions(run_dir)
    bad = {"type": "step", "step": {"index": 1, "action": {"args": {}}}}
    path.write_text(json.dumps(bad) + "\n" + json.dumps({"type": "end"}) + "\n")
    with pytest.raises(SpecError, match=r"trajectory.jsonl:1: "):
        load_actions(run_dir)


def test_replaying_an_episode_reproduces_its_actions_and_scores(tmp_path: Path) -> None:
    from rgym_core.registry import load_registry
    from rgym_core.rundir import read_steps
    from rgym_core.runner import RunConfig, run_episode

    registry = load_registry()
    first = run_episode(RunConfig(task="rgym/demo", agent="scripted", runs_dir=tmp_path / "a",
                                  archive_workspace=False), registry)
    again = run_episode(RunConfig(task="rgym/demo", agent="replay", runs_dir=tmp_path / "b",
                                  agent_options={"trajectory": first.run_dir},
                                  archive_workspace=False), registry)
    assert again.agent == "rgym/replay" and again.status == first.status
    before, after = read_steps(Path(first.run_dir)), read_steps(Path(again.run_dir))
    assert [(s.action.tool, s.action.args) for s in after] == [
        (s.action.tool, s.action.args) for s in before]
    assert first.final_scores is not None
    assert again.final_scores == pytest.approx(first.final_scores)

"""The replay agent on MLGym trajectories: a ``.traj`` file's text commands, parsed by
the ACI command parser, replayed against an rgym task through ``rgym run``.

The fixture is written in the format of MLGym's agent (``mlgym/agent/base.py``
``save_trajectory``; the view plugin's ``fixtures/mlgym/`` has real-shaped ones): an
episode of the demo task that opens ``baseline.py``, edits it (a fit with an
intercept) in two ``edit N:M`` ... ``end_of_edit`` commands, runs it, validates
and submits.  The edits take r2 above the baseline's, so a score above it shows
the edits were applied, not only sent.
"""

from __future__ import annotations

import json
from pathlib import Path

from rgym_core.rundir import read_steps
from rgym_core.testing import run_cli

BASELINE_R2 = 0.8720872187853115
FIT = ("edit 10:10\n"
       "n = len(rows)\n"
       "mx = sum(x for x, _ in rows) / n\n"
       "my = sum(y for _, y in rows) / n\n"
       "slope = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)\n"
       "intercept = my - slope * mx\n"
       "end_of_edit\n")
PREDICT = "edit 22:22\n        writer.writerow([idx, slope * x + intercept])\nend_of_edit\n"
ACTIONS = ["ls\n", 'open "baseline.py"\n', FIT, PREDICT, "python baseline.py\n", "validate\n", "submit\n"]


def write_traj(path: Path, actions: list[str]) -> Path:
    steps = [{"action": action, "observation": "(recorded output)",
              "response": f"DISCUSSION\nStep {n}.\n\n```\n{action}```",
              "state": "{\"open_file\": \"n/a\", \"working_dir\": \"/home/agent/workspace\"}",
              "thought": f"DISCUSSION\nStep {n}.\n\n", "execution_time": 0.2}
             for n, action in enumerate(actions, start=1)]
    data = {"environment": "mlgym_main", "trajectory": steps,
            "history": [{"role": "system", "content": "SETTING: ...", "agent": "primary"}],
            "info": {"model_stats": {"total_cost": 0.01, "tokens_sent": 900, "tokens_received": 90,
                                     "api_calls": len(actions)},
                     "exit_status": "submitted", "submission": "/home/agent/workspace/submission.csv",
                     "score": [{"r2": 0.97}, {"r2": 0.97}]}}
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def replay(traj: Path, runs: Path):  # type: ignore[no-untyped-def]
    return run_cli("run", "rgym/demo", "--agent", "replay", "--agent-option", f"trajectory={traj}",
                   "--runs-dir", str(runs), "--json")


def test_an_mlgym_traj_replays_against_the_task(tmp_path: Path) -> None:
    traj = write_traj(tmp_path / "demo.traj", ACTIONS)
    proc = replay(traj, tmp_path / "runs")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted" and result["end_reason"] == "submit"
    assert result["steps"] == len(ACTIONS) and result["cost_usd"] == 0
    steps = read_steps(Path(result["run_dir"]))
    assert [s.action.tool for s in steps] == ["bash", "open", "edit", "edit", "bash", "validate", "submit"]
    assert steps[1].action.args == {"path": "baseline.py"}
    assert (steps[3].action.args["start_line"], steps[3].action.args["end_line"]) == (22, 22)
    assert steps[2].action.args["replacement"].endswith("intercept = my - slope * mx")
    assert steps[2].action.thought == "DISCUSSION\nStep 3.\n\n" and steps[2].action.raw == FIT
    assert "predictions" in steps[4].observation.output  # baseline.py ran, here
    kinds = [s["kind"] for s in result["scores"]]
    assert kinds == ["validate", "submit"]
    assert result["final_scores"]["r2"] > BASELINE_R2 + 0.05  # the replayed edits took effect


def test_a_command_the_tools_cannot_parse_names_its_step(tmp_path: Path) -> None:
    traj = write_traj(tmp_path / "bad.traj", ["ls\n", "edit 3\nx = 1\nend_of_edit\n"])
    proc = replay(traj, tmp_path / "runs")
    result = json.loads(proc.stdout)
    assert result["status"] == "error" and result["steps"] == 0
    assert f"{traj}: step 2: 'edit 3' does not parse" in result["error"]
    assert "end_line" in result["error"]


def test_a_file_not_in_mlgyms_format_is_one_line(tmp_path: Path) -> None:
    traj = tmp_path / "broken.traj"
    traj.write_text(json.dumps({"trajectory": [{"observation": "x"}]}))
    proc = replay(traj, tmp_path / "runs")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: agent 'rgym/replay' could not start: {traj}: trajectory[0].action: missing "
        "(the command the agent ran, as text)"]


def test_a_resumed_replay_goes_on_after_the_steps_already_played(tmp_path: Path) -> None:
    from rgym_core.aci.core_tools import BashTool, SubmitTool, ValidateTool
    from rgym_core.aci.editor import EditTool
    from rgym_core.aci.viewer import OpenTool
    from rgym_core.agents import AgentConfig, EpisodeStatus, TaskContext
    from rgym_core.records import Observation, Step
    from rgym_core.replay import ReplayAgent
    from rgym_core.specs import Budget

    traj = write_traj(tmp_path / "demo.traj", ACTIONS)
    agent = ReplayAgent(AgentConfig(options={"trajectory": str(traj)}))
    budget = Budget()
    tools = [t.schema for t in (BashTool, OpenTool, EditTool, ValidateTool, SubmitTool)]
    agent.start(TaskContext(task_id="rgym/demo", description="d", tools=tools, budget=budget,
                            status=EpisodeStatus(budget=budget)))
    played = [Step(index=n, action=agent.actions[n - 1], observation=Observation(output=""),
                   started_at=0.0, duration_s=0.0)
              for n in (1, 2, 3)]
    agent.resume(played)
    nxt = agent.act(Observation(output=""))
    assert (nxt.tool, nxt.args["start_line"]) == ("edit", 22)
    assert agent.describe()["format"] == "mlgym-traj" and agent.unknown_tools == []

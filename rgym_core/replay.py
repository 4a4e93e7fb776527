"""The replay agent: re-runs the actions of a saved trajectory.

``rgym run TASK --agent replay --agent-option trajectory=RUN_DIR`` (or the path of
its ``trajectory.jsonl``) sends the recorded actions again, in order, to
reproduce or debug an episode without a model.  Thoughts and raw model output
are kept; usage is not (a replay spends nothing).  When the recorded actions
run out the agent submits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgym_core.agents import AgentConfig, TaskContext
from rgym_core.records import Action, Observation, Step
from rgym_core.serialization import SpecError, structure

TRAJECTORY_FILE = "trajectory.jsonl"


def recorded_task(path: Path | str) -> str | None:
    """The task id named by a trajectory's ``start`` record, if any."""
    path = Path(path)
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return None
    return first.get("task") if isinstance(first, dict) and first.get("type") == "start" else None


def load_actions(path: Path | str) -> list[Action]:
    """The actions of a saved trajectory (a run directory or its ``trajectory.jsonl``).

    Raises :class:`~rgym_core.serialization.SpecError` naming the file and line for
    a missing file, a line that is not JSON, or a step that does not parse.
    """
    path = Path(path)
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), "", "file not found; give a run directory or its "
                                       f"{TRAJECTORY_FILE}") from None
    lines = text.splitlines()
    actions: list[Action] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # a torn last line from a killed run
                break
            raise SpecError(str(path), f"line {number}", f"invalid JSON: {exc.msg}") from None
        if not isinstance(record, dict) or record.get("type") != "step":
            continue
        step = structure(record.get("step"), Step, f"{path}:{number}", strict=False)
        action = step.action
        actions.append(Action(tool=action.tool, args=dict(action.args), thought=action.thought,
                              raw=action.raw, call_id=action.call_id))
    return actions


class ReplayAgent:
    """Replays the actions of ``config.options["trajectory"]``, then submits."""

    def __init__(self, config: AgentConfig) -> None:
        source = config.options.get("trajectory")
        if not source:
            raise ValueError("the replay agent needs a trajectory: "
                             "--agent-option trajectory=RUN_DIR (or .../trajectory.jsonl)")
        self.source = Path(str(source)).expanduser()
        self.actions = load_actions(self.source)
        recorded = recorded_task(self.source)
        any_task = str(config.options.get("any_task", "")).lower() in ("1", "true", "yes")
        if config.task_id and recorded and recorded != config.task_id and not any_task:
            raise ValueError(f"{self.source}: the trajectory is of task '{recorded}', not "
                             f"'{config.task_id}'; pass --agent-option any_task=true to replay it anyway")
        self.position = 0
        self.unknown_tools: list[str] = []

    def start(self, context: TaskContext) -> None:
        names = {t.name for t in context.tools}
        self.unknown_tools = sorted({a.tool for a in self.actions if a.tool not in names})

    def act(self, observation: Observation) -> Action:
        if self.position >= len(self.actions):
            return Action(tool="submit", thought="the replayed trajectory has no more actions")
        action = self.actions[self.position]
        self.position += 1
        return action

    def describe(self) -> dict[str, Any]:
        """Where the replay stands (for logs)."""
        return {"trajectory": str(self.source), "actions": len(self.actions),
                "replayed": self.position, "unknown_tools": self.unknown_tools}

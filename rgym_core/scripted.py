"""The scripted reference agent ``rgym/scripted``: no LLM, no API key.

It performs the task's ``scripted_actions`` (or a script file given with
``--agent-option script=FILE``, a YAML/JSON list of ``{tool, args}``), then
submits.  A task without a script gets a generic one: look at the workspace,
validate the starter as it is, and submit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_core.agents import AgentConfig, TaskContext
from rgym_core.records import Action, Observation, Step
from rgym_core.serialization import SpecError, read_data_file

DEFAULT_SCRIPT: list[dict[str, Any]] = [
    {"tool": "bash", "args": {"command": "ls -la"}},
    {"tool": "validate"},
    {"tool": "submit"},
]


def _to_action(item: Any, where: str) -> Action:
    if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
        raise SpecError(where, "tool", "each scripted action needs 'tool' (and optional 'args')")
    args = item.get("args") or {}
    if not isinstance(args, dict):
        raise SpecError(where, "args", "must be a mapping of argument names to values")
    return Action(tool=item["tool"], args=dict(args), thought=item.get("thought"))


class ScriptedAgent:
    """Plays a fixed list of actions, then submits."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.actions: list[Action] = []
        self.observations: list[Observation] = []
        self._script: list[Action] | None = None
        script_file = config.options.get("script")
        if script_file:  # read now, so a bad script stops the run before it starts
            data = read_data_file(Path(str(script_file)))
            if not isinstance(data, list):
                raise SpecError(str(script_file), "", "a script is a list of actions")
            self._script = [_to_action(item, f"{script_file}[{i}]") for i, item in enumerate(data)]

    def start(self, context: TaskContext) -> None:
        if self._script is not None:
            self.actions = list(self._script)
        else:
            items = context.scripted_actions or DEFAULT_SCRIPT
            where = f"task {context.task_id}: scripted_actions"
            self.actions = [_to_action(item, f"{where}[{i}]") for i, item in enumerate(items)]
        tools = {t.name for t in context.tools}
        if "submit" in tools and not any(a.tool == "submit" for a in self.actions):
            self.actions.append(Action(tool="submit"))

    def act(self, observation: Observation) -> Action:
        self.observations.append(observation)
        if not self.actions:
            return Action(tool="submit")
        return self.actions.pop(0)

    def resume(self, steps: list[Step], state: object = None) -> None:
        """Continue after ``steps``: drop the actions they already played."""
        del self.actions[:len(steps)]
        self.observations = [s.observation for s in steps[:-1]]

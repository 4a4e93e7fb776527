"""The baseline agent (MLGym's ``SubmitBaseline``): the reference row of every task.

It runs the task's baseline command (``TaskContext.baseline_command``, for example
``python baseline.py``) once through the ``bash`` tool, then submits the
workspace.  A task without a baseline command gets its starter files submitted
as they are.  ``--agent-option command="..."`` runs another command instead,
and ``--agent-option validate=true`` validates before submitting.
"""

from __future__ import annotations

from rgym_core import Action, AgentConfig, Observation, TaskContext


def _flag(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class BaselineAgent:
    """Runs the baseline command, optionally validates, then submits."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.plan: list[Action] = []

    def start(self, context: TaskContext) -> None:
        command = self.config.options.get("command") or context.baseline_command
        tools = {t.name for t in context.tools}
        self.plan = []
        if command:
            self.plan.append(Action.bash(str(command), thought="run the task's baseline"))
        if _flag(self.config.options.get("validate", False)) and "validate" in tools:
            self.plan.append(Action(tool="validate", thought="score the baseline's output"))
        thought = ("submit the baseline's output" if command
                   else "the task has no baseline command: submit the starter files")
        self.plan.append(Action(tool="submit", thought=thought))

    def act(self, observation: Observation) -> Action:
        if not self.plan:  # the runner ends the episode at submit; this is a safeguard
            return Action(tool="submit")
        return self.plan.pop(0)

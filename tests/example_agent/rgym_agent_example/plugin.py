"""The ``example/example`` agent, registered through the ``rgym`` entry point.

It shows the whole contract of a scaffold: ``start`` receives the task context
(description, tool schemas, budget), ``act`` receives the last observation and
returns the next :class:`~rgym_core.Action`.  Both are ``async`` here; plain
methods work too.  It lists the workspace, runs the task's baseline command,
validates and submits.
"""

from __future__ import annotations

import asyncio

from rgym_core import Action, AgentConfig, AgentSpec, Observation, TaskContext, hookimpl


class ExampleAgent:
    """Looks around, runs the baseline, validates and submits."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.plan: list[Action] = []
        self.seen: list[str] = []

    async def start(self, context: TaskContext) -> None:
        await asyncio.sleep(0)  # a real scaffold would open its model client here
        tools = {schema.name for schema in context.tools}
        self.plan = [Action.bash("ls -A", thought="see what the task gave me")]
        if context.baseline_command:
            self.plan.append(Action.bash(context.baseline_command, thought="run the baseline"))
        if "validate" in tools:
            self.plan.append(Action(tool="validate", thought="check the score"))
        self.plan.append(Action(tool="submit", thought="done"))

    async def act(self, observation: Observation) -> Action:
        await asyncio.sleep(0)
        self.seen.append(observation.output)
        if not self.plan:  # the runner ends the episode at submit; this is a safeguard
            return Action(tool="submit")
        return self.plan.pop(0)

    async def close(self) -> None:
        await asyncio.sleep(0)


@hookimpl
def rgym_register_agents() -> list[AgentSpec]:
    return [AgentSpec(name="example/example", factory=ExampleAgent,
                      description="a minimal asynchronous third-party scaffold")]

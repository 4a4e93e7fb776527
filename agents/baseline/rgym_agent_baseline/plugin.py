"""Registers the ``baseline/baseline`` agent (``--agent baseline``)."""

from __future__ import annotations

from rgym_agent_baseline.agent import BaselineAgent
from rgym_core import AgentSpec, hookimpl


@hookimpl
def rgym_register_agents() -> list[AgentSpec]:
    return [AgentSpec(name="baseline/baseline", factory=BaselineAgent,
                      description="runs the task's baseline command and submits (no LLM): "
                                  "the reference row of every task",
                      options={"command": "run this instead of the task's baseline command",
                               "validate": "true to validate before submitting"})]

"""Registers the ``baseline/baseline`` agent (``--agent baseline``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import AgentSpec


def _baseline_agent(config: Any) -> Any:
    """The agent factory: imports the agent module on first use (fast start-up)."""
    from rgym_agent_baseline.agent import BaselineAgent

    return BaselineAgent(config)


@hookimpl
def rgym_register_agents() -> list[AgentSpec]:
    from rgym_core import AgentSpec

    return [AgentSpec(name="baseline/baseline", factory=_baseline_agent,
                      description="runs the task's baseline command and submits (no LLM): "
                                  "the reference row of every task",
                      options={"command": "run this instead of the task's baseline command",
                               "validate": "true to validate before submitting"})]

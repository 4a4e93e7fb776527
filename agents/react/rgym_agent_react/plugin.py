"""rgym plugin ``react``: registers the ``react/react`` agent."""

from __future__ import annotations

from typing import Any

from rgym_core import hookimpl


def _react_agent(config: Any) -> Any:
    """The agent factory: imports the agent module (and its model client) on first use."""
    from rgym_agent_react.agent import ReactAgent

    return ReactAgent(config)


@hookimpl
def rgym_register_agents():  # type: ignore[no-untyped-def]
    from rgym_core import AgentSpec

    return [AgentSpec(name="react/react", factory=_react_agent, needs_model=True,
                      description="SWE-agent/MLGym-style ReAct loop over an LLM: text commands "
                                  "(default) or native tool calls (--agent-option mode=tools)")]

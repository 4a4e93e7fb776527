"""rgym plugin ``react``: registers the ``react/react`` agent."""

from __future__ import annotations

from rgym_core.hookspecs import hookimpl


@hookimpl
def rgym_register_agents():  # type: ignore[no-untyped-def]
    from rgym_agent_react.agent import ReactAgent
    from rgym_core.agents import AgentSpec

    return [AgentSpec(name="react/react", factory=ReactAgent, needs_model=True,
                      description="SWE-agent/MLGym-style ReAct loop over an LLM: text commands "
                                  "(default) or native tool calls (--agent-option mode=tools)")]

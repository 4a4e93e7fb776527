"""The ReAct scaffold for rgym (``--agent react``)."""

from rgym_agent_react.agent import ReactAgent, ReactOptions

__all__ = ["ReactAgent", "ReactOptions"]

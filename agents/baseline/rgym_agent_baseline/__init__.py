"""rgym's baseline agent: runs the task's baseline command, then submits."""

from rgym_agent_baseline.agent import BaselineAgent

__all__ = ["BaselineAgent"]

"""rgym's baseline agent: runs the task's baseline command, then submits.

The agent module is imported on first use (fast ``rgym`` start-up)."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {"BaselineAgent": "rgym_agent_baseline.agent"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["BaselineAgent"]

if TYPE_CHECKING:  # for type checkers and IDEs
    from rgym_agent_baseline.agent import BaselineAgent

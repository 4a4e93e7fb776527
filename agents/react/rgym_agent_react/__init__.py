"""The ReAct scaffold for rgym (``--agent react``).

The agent module (and the model client it brings) is imported on first use, so that
``rgym --help`` / ``rgym list`` stay fast with the plugin installed."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {"ReactAgent": "rgym_agent_react.agent", "ReactOptions": "rgym_agent_react.agent"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["ReactAgent", "ReactOptions"]

if TYPE_CHECKING:  # for type checkers and IDEs
    from rgym_agent_react.agent import ReactAgent, ReactOptions

"""The file tools agents see: the viewer (:mod:`rgym_core.aci.viewer`) and the
linting editor (:mod:`rgym_core.aci.editor`)."""

from __future__ import annotations

from rgym_core.aci.editor import EditTool, InsertTool
from rgym_core.aci.viewer import CreateTool, GotoTool, OpenTool, ScrollDownTool, ScrollUpTool
from rgym_core.tools import Tool


def file_tools() -> list[Tool]:
    """``open``, ``goto``, ``scroll_up``, ``scroll_down``, ``create``, ``edit``, ``insert``."""
    return [OpenTool(), GotoTool(), ScrollUpTool(), ScrollDownTool(), CreateTool(), EditTool(),
            InsertTool()]

"""The agent-computer interface: rgym's built-in tools (shell, file viewer,
linting editor, search, validate, submit)."""

from __future__ import annotations

from rgym_core.tools import Tool


def builtin_tools() -> list[Tool]:
    """Every built-in tool, in the order agents see them."""
    from rgym_core.aci.core_tools import BashTool, SubmitTool, ValidateTool

    tools: list[Tool] = [BashTool()]
    try:
        from rgym_core.aci.files import file_tools
    except ImportError:  # the file viewer and editor are being written
        file_tools = None
    if file_tools is not None:
        tools.extend(file_tools())
    from rgym_core.aci.search import search_tools

    tools.extend(search_tools())
    tools.extend([ValidateTool(), SubmitTool()])
    return tools

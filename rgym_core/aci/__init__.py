"""The agent-computer interface: rgym's built-in tools (shell, file viewer,
linting editor, search, validate, submit)."""

from __future__ import annotations

from rgym_core.tools import Tool


def builtin_tools() -> list[Tool]:
    """Every built-in tool, in the order agents see them."""
    from rgym_core.aci.core_tools import BashTool, SubmitTool, ValidateTool
    from rgym_core.aci.files import file_tools

    tools: list[Tool] = [BashTool(), *file_tools()]
    from rgym_core.aci.search import search_tools

    tools.extend(search_tools())
    tools.extend([ValidateTool(), SubmitTool()])
    from rgym_core.aci.jobs import job_tools

    tools.extend(job_tools())  # not default: --tool jobs, or a task's tools: [jobs]
    return tools

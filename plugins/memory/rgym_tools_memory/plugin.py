"""The plugin module named by the ``rgym`` entry point ``memory``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import Tool


@hookimpl
def rgym_register_tools() -> list[Tool]:
    from rgym_tools_memory.tools import memory_tools

    return memory_tools()

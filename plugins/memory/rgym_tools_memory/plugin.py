"""The plugin module named by the ``rgym`` entry point ``memory``."""

from __future__ import annotations

from rgym_core.hookspecs import hookimpl


@hookimpl
def rgym_register_tools():  # type: ignore[no-untyped-def]
    from rgym_tools_memory.tools import memory_tools

    return memory_tools()

"""rgym plugin entry point: registers ``literature/literature_search``."""

from __future__ import annotations

from rgym_core.hookspecs import hookimpl


@hookimpl
def rgym_register_tools():  # type: ignore[no-untyped-def]
    from rgym_tools_literature.tool import LiteratureSearchTool

    return [LiteratureSearchTool()]

"""rgym plugin entry point: registers ``literature/literature_search``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import Tool


@hookimpl
def rgym_register_tools() -> list[Tool]:
    from rgym_tools_literature.tool import LiteratureSearchTool

    return [LiteratureSearchTool()]

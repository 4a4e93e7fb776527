"""rgym plugin entry point: registers ``pdf/read_pdf``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import Tool


@hookimpl
def rgym_register_tools() -> list[Tool]:
    from rgym_tools_pdf.tool import ReadPdfTool

    return [ReadPdfTool()]

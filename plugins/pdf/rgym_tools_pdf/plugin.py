"""rgym plugin entry point: registers ``pdf/read_pdf``."""

from __future__ import annotations

from rgym_core.hookspecs import hookimpl


@hookimpl
def rgym_register_tools():  # type: ignore[no-untyped-def]
    from rgym_tools_pdf.tool import ReadPdfTool

    return [ReadPdfTool()]

"""rgym-tools-pdf: read PDFs from URLs or the workspace, host-side, for rgym agents.
Names are imported on first use (pypdf and httpx are heavy)."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {
    "BlockedURL": "rgym_tools_pdf.netguard",
    "Download": "rgym_tools_pdf.download",
    "NotAPdf": "rgym_tools_pdf.download",
    "PdfError": "rgym_tools_pdf.extract",
    "ReadPdfTool": "rgym_tools_pdf.tool",
    "URLGuard": "rgym_tools_pdf.netguard",
    "download_pdf": "rgym_tools_pdf.download",
    "format_pages": "rgym_tools_pdf.pages",
    "open_pdf": "rgym_tools_pdf.extract",
    "parse_pages": "rgym_tools_pdf.pages",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "BlockedURL", "Download", "NotAPdf", "PdfError", "ReadPdfTool", "URLGuard", "download_pdf",
    "format_pages", "open_pdf", "parse_pages",
]

if TYPE_CHECKING:
    from rgym_tools_pdf.download import Download, NotAPdf, download_pdf
    from rgym_tools_pdf.extract import PdfError, open_pdf
    from rgym_tools_pdf.netguard import BlockedURL, URLGuard
    from rgym_tools_pdf.pages import format_pages, parse_pages
    from rgym_tools_pdf.tool import ReadPdfTool

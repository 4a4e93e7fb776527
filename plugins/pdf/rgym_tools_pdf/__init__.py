"""rgym-tools-pdf: read PDFs from URLs or the workspace, host-side, for rgym agents."""

from rgym_tools_pdf.download import Download, NotAPdf, download_pdf
from rgym_tools_pdf.extract import PdfError, open_pdf
from rgym_tools_pdf.netguard import BlockedURL, URLGuard
from rgym_tools_pdf.pages import format_pages, parse_pages
from rgym_tools_pdf.tool import ReadPdfTool

__all__ = ["BlockedURL", "Download", "NotAPdf", "PdfError", "ReadPdfTool", "URLGuard",
           "download_pdf", "format_pages", "open_pdf", "parse_pages"]

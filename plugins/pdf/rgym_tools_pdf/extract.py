"""Text extraction with pypdf, with errors an agent can act on.

pypdf is imported by the first PDF opened: registering the tool (every ``rgym run``
builds the tool table) costs no pypdf import.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pypdf


class PdfError(Exception):
    """The PDF cannot be read (encrypted, damaged); the message is for the agent."""


def open_pdf(data: bytes, source: str) -> pypdf.PdfReader:
    """A reader over ``data``; encrypted files are opened when the empty password
    works, else :class:`PdfError`."""
    import pypdf
    from pypdf.errors import PdfReadError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception as exc:  # noqa: BLE001 - e.g. a cipher pypdf cannot handle
                raise PdfError(f"{source} is encrypted and cannot be decrypted "
                               f"({type(exc).__name__}); read_pdf cannot read it") from None
            if not ok:
                raise PdfError(f"{source} is encrypted (password protected); read_pdf cannot "
                               "read it")
        _ = len(reader.pages)
    except PdfError:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise PdfError(f"{source} could not be parsed as a PDF ({type(exc).__name__}: "
                       f"{exc})") from None
    return reader


def page_text(reader: pypdf.PdfReader, number: int) -> str:
    """The text of 1-based page ``number``; a page that fails says so instead."""
    try:
        text = reader.pages[number - 1].extract_text() or ""
    except Exception as exc:  # noqa: BLE001 - one bad page must not lose the others
        return f"[text extraction failed on this page: {type(exc).__name__}]"
    text = text.strip()
    return text or "[no extractable text on this page; it may be a scanned image]"

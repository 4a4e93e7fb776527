"""Downloading a PDF: streamed under a size cap, with a content-type check and retries."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from attrs import define

from rgym_core import RetryPolicy, call_with_retries, check_status
from rgym_tools_pdf.netguard import URLGuard

#: Content types accepted as PDFs without looking.
PDF_TYPES = {"application/pdf", "application/x-pdf", "application/acrobat", "applications/vnd.pdf"}
#: Content types that might hide a PDF: accepted when the body starts like one.
GENERIC_TYPES = {"", "application/octet-stream", "binary/octet-stream", "application/download",
                 "application/x-download", "application/force-download", "application/unknown"}
MAGIC = b"%PDF-"


class NotAPdf(Exception):
    """The answer is not a PDF, or is too large; the message says which, for the agent."""


@define
class Download:
    data: bytes
    url: str
    content_type: str
    attempts: int


def looks_like_pdf(data: bytes) -> bool:
    """``%PDF-`` within the first KiB, as readers accept."""
    return MAGIC in data[:1024]


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def download_pdf(url: str, *, max_bytes: int, guard: URLGuard,
                 policy: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> Download:
    """Fetch ``url`` as a PDF.

    Raises :class:`NotAPdf` (wrong content type, no ``%PDF`` signature, larger
    than ``max_bytes``), :class:`~rgym_tools_pdf.netguard.BlockedURL` and
    :class:`~rgym_core.http.RequestFailed`.
    """
    policy = policy or RetryPolicy()
    service = httpx.URL(url).host or url

    def once(client: httpx.Client) -> Download:
        with client.stream("GET", url) as response:
            if response.status_code >= 300:
                head = b""
                for chunk in response.iter_bytes():
                    head += chunk
                    if len(head) > 65536:
                        break
                check_status(httpx.Response(response.status_code, headers=response.headers,
                                            content=head[:65536]), service)
            ctype = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype not in PDF_TYPES and ctype not in GENERIC_TYPES:
                hint = (" (probably a landing or login page; look for a direct PDF link, e.g. "
                        "https://arxiv.org/pdf/<id> for arXiv)") if "html" in ctype else ""
                raise NotAPdf(f"{url} is {ctype}, not a PDF{hint}")
            length = response.headers.get("content-length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise NotAPdf(f"{url} is {_mb(int(length))}, over the {_mb(max_bytes)} "
                              "download limit; not downloaded")
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > max_bytes:
                    raise NotAPdf(f"{url} is larger than the {_mb(max_bytes)} download limit; "
                                  f"download aborted after {_mb(len(data))}")
            if not looks_like_pdf(bytes(data)):
                said = f"served as {ctype}" if ctype else "served without a content type"
                raise NotAPdf(f"{url} is not a PDF ({said}, and it does not start with %PDF)")
            return Download(bytes(data), str(response.url), ctype, 0)

    with httpx.Client(timeout=policy.timeout, follow_redirects=True, max_redirects=5,
                      headers={"user-agent": "rgym-tools-pdf/0.1"},
                      event_hooks={"request": [guard.on_request]}) as client:
        result, attempts = call_with_retries(lambda: once(client), policy, service=service,
                                             sleep=sleep)
    result.attempts = attempts
    return result

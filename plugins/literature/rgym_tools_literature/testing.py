"""Test helpers: a real HTTP server on 127.0.0.1 and generated papers and PDFs.

:class:`LoopbackServer` serves scripted :class:`Reply` objects per path (queued
one-shot replies first, then a standing handler) and records every request.
:func:`scholar_search_handler` answers like Semantic Scholar's paper search
(``total``/``offset``/``next``/``data``), and :func:`make_pdf` writes a small
real PDF whose text pypdf can extract.  Used by this package's and
rgym-tools-pdf's tests; no dependency beyond the standard library.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
from collections import defaultdict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from attrs import define, field


@define
class Reply:
    """One scripted HTTP answer.  A dict or list body is sent as JSON; ``delay_s``
    sleeps before answering; ``omit_length`` omits Content-Length (the body
    ends when the connection closes)."""

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: dict[str, str] = field(factory=dict)
    content_type: str | None = None
    delay_s: float = 0.0
    omit_length: bool = False

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, dict | list):
            return json.dumps(self.body).encode(), self.content_type or "application/json"
        if isinstance(self.body, str):
            return self.body.encode(), self.content_type or "text/plain; charset=utf-8"
        return bytes(self.body), self.content_type or "application/octet-stream"


@define
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    at: float


Handler = Callable[[RecordedRequest], Reply]


class LoopbackServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 with scripted replies; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                parsed = urllib.parse.urlsplit(self.path)
                req = RecordedRequest(
                    method="GET", path=parsed.path,
                    query=dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in self.headers.items()}, at=time.monotonic())
                reply = server._reply_for(req)
                body, ctype = reply.encoded()
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(reply.status)
                    self.send_header("Content-Type", ctype)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    if reply.omit_length:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    else:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to ``path`` with ``replies``, in order."""
        with self._lock:
            self._queues[path].extend(replies)

    def handle(self, path: str, handler: Handler | Reply) -> None:
        """Answer every request to ``path`` (after its queue is empty) with ``handler``."""
        self._handlers[path] = handler if callable(handler) else (lambda _r, h=handler: h)

    def hits(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def _reply_for(self, req: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(req)
            queued = self._queues.get(req.path)
            if queued:
                return queued.popleft()
        handler = self._handlers.get(req.path)
        if handler is None:
            return Reply(404, {"error": f"no route for {req.path}"})
        return handler(req)

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_paper(paper_id: str, title: str, *, year: int | None = 2020,
               abstract: str | None = None, authors: list[str] | None = None,
               venue: str = "NeurIPS", citations: int = 10, pdf_url: str | None = None,
               arxiv: str | None = None, doi: str | None = None,
               publication_date: str | None = None) -> dict[str, Any]:
    """One paper in the Graph API's JSON form."""
    ext: dict[str, Any] = {"CorpusId": abs(hash(paper_id)) % 10**8}
    if arxiv:
        ext["ArXiv"] = arxiv
    if doi:
        ext["DOI"] = doi
    return {
        "paperId": paper_id, "title": title, "year": year, "venue": venue,
        "abstract": abstract if abstract is not None else f"We study {title.lower()}.",
        "authors": [{"authorId": str(i), "name": n}
                    for i, n in enumerate(authors or ["Ada Lovelace", "Alan Turing"])],
        "citationCount": citations,
        "openAccessPdf": {"url": pdf_url, "status": "GREEN"} if pdf_url else None,
        "externalIds": ext, "publicationDate": publication_date,
        "url": f"https://www.semanticscholar.org/paper/{paper_id}",
    }


def scholar_search_handler(papers: list[dict[str, Any]]) -> Handler:
    """A handler for ``/graph/v1/paper/search`` over ``papers``: every query word must
    appear in the title or abstract; honours ``offset``, ``limit`` (1-100) and ``year``."""

    def in_years(paper: dict[str, Any], years: str) -> bool:
        year = paper.get("year")
        if not years:
            return True
        if year is None:
            return False
        lo, _, hi = years.partition("-") if "-" in years else (years, "", years)
        return (not lo or year >= int(lo)) and (not hi or year <= int(hi))

    def handler(req: RecordedRequest) -> Reply:
        query = req.query.get("query", "").lower().split()
        try:
            offset = int(req.query.get("offset", "0"))
            limit = int(req.query.get("limit", "100"))
        except ValueError:
            return Reply(400, {"error": "offset and limit must be integers"})
        if not 1 <= limit <= 100:
            return Reply(400, {"error": "Requested limit is outside the range [1, 100]"})
        matches = [p for p in papers
                   if all(w in (p["title"] + " " + (p.get("abstract") or "")).lower() for w in query)
                   and in_years(p, req.query.get("year", ""))]
        page = matches[offset:offset + limit]
        body: dict[str, Any] = {"total": len(matches), "offset": offset, "data": page}
        if offset + limit < len(matches):
            body["next"] = offset + limit
        return Reply(200, body)

    return handler


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one page per string (lines split on ``\\n``), in Helvetica, so
    that text extraction gives the lines back."""
    objects: list[bytes] = []
    n = len(pages)
    # 1: catalog, 2: pages, 3: font, then (page, content) pairs.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
                   b"/Encoding /WinAnsiEncoding >>")
    for i, text in enumerate(pages):
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 760 Td"]
        for line in text.split("\n"):
            ops.append(f"({_pdf_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1", "replace")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
                       .encode())
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream
                       + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{num} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
            .encode())
    return bytes(out)

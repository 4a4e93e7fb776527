"""A real HTTP server on 127.0.0.1 with scripted replies, for tests of API clients.

One server for every pack's tests (the LLM backends, literature search, PDF
downloads...): requests are answered by path, first from a queue of one-shot
:class:`Reply` objects, then by a standing handler, then by the fallback handler
(404 by default).  Every request is recorded (:class:`RecordedRequest`: method,
path, query, headers, body).  Replies can be delayed (to trip client timeouts),
sent without a length, or streamed chunk by chunk (server-sent events)::

    from rgym_core.testing import LoopbackServer, Reply

    with LoopbackServer() as server:
        server.queue("/v1/search", Reply(429, headers={"Retry-After": "1"}))
        server.handle("/v1/search", Reply(200, {"data": []}))
        httpx.get(server.url + "/v1/search?q=x")
        assert server.hits("/v1/search")[0].query == {"q": "x"}

Standard library and attrs only; it never listens beyond loopback.
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
    """One scripted HTTP answer.

    A dict or list ``body`` is sent as JSON, a str as UTF-8 text.  ``delay_s``
    waits before answering (the wait ends early, without an answer, when the
    server stops).  ``omit_length`` sends no Content-Length (the body ends when
    the connection closes).  ``chunks`` streams those byte strings one by one
    instead of ``body`` (flushing each; the connection closes after the last).
    """

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: dict[str, str] = field(factory=dict)
    content_type: str | None = None
    delay_s: float = 0.0
    omit_length: bool = False
    chunks: list[bytes] | None = None

    def encoded(self) -> tuple[bytes, str]:
        """The body as bytes, and its default content type."""
        if isinstance(self.body, dict | list):
            return json.dumps(self.body).encode(), self.content_type or "application/json"
        if isinstance(self.body, str):
            return self.body.encode(), self.content_type or "text/plain; charset=utf-8"
        return bytes(self.body), self.content_type or "application/octet-stream"


@define
class RecordedRequest:
    """A request the server received (header names in lower case)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    at: float = 0.0

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @property
    def json(self) -> Any:
        """The body parsed as JSON (``None`` when empty or not JSON)."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


Handler = Callable[[RecordedRequest], Reply]


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (any free port); a context manager."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, protocol: str = "HTTP/1.1",
                 fallback: Handler | None = None) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"LoopbackServer listens on loopback only, not {host!r}")
        self.requests: list[RecordedRequest] = []
        self.fallback: Handler = fallback or (lambda r: Reply(404, {"error": f"no route for {r.path}"}))
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class(protocol))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="rgym-loopback-http", daemon=True)
        self._started = False

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        host, port = self._httpd.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}"

    def start(self) -> LoopbackServer:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._started:
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._started:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------

    def queue(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to ``path`` with ``replies``, in order."""
        with self._lock:
            self._queues[path].extend(replies)

    def handle(self, path: str, handler: Handler | Reply) -> None:
        """Answer every request to ``path`` (once its queue is empty) with ``handler``."""
        with self._lock:
            self._handlers[path] = handler if callable(handler) else _constant(handler)

    def hits(self, path: str) -> list[RecordedRequest]:
        """The recorded requests to ``path``."""
        return [r for r in self.requests if r.path == path]

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            queued = self._queues.get(request.path)
            if queued:
                return queued.popleft()
            handler = self._handlers.get(request.path)
        return (handler or self.fallback)(request)

    # -- serving ---------------------------------------------------------------

    def _handler_class(self, protocol: str) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = protocol

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _serve(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = RecordedRequest(
                    method=self.command, path=parsed.path,
                    query=dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                    at=time.monotonic())
                reply = server._reply_for(request)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    self.close_connection = True
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)

            def _send(self, reply: Reply) -> None:
                data, ctype = reply.encoded()
                self.send_response(reply.status)
                if not any(k.lower() == "content-type" for k in reply.headers):
                    self.send_header("Content-Type", ctype if reply.chunks is None
                                     else reply.content_type or "text/event-stream")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.chunks is not None or reply.omit_length:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                for chunk in (reply.chunks if reply.chunks is not None else [data]):
                    self.wfile.write(chunk)
                    self.wfile.flush()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve  # noqa: N815

        return _Handler


def _constant(reply: Reply) -> Handler:
    def handler(_request: RecordedRequest) -> Reply:
        return reply

    return handler


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event carrying ``data`` as JSON (for :attr:`Reply.chunks`)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def json_reply(data: Any, status: int = 200, **headers: str) -> Reply:
    """A JSON reply."""
    return Reply(status, data, headers=dict(headers))


__all__ = ["Handler", "LoopbackServer", "RecordedRequest", "Reply", "json_reply", "sse"]

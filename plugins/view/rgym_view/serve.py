"""``rgym view --serve``: the viewer on a loopback HTTP server, rebuilt while runs are live.

The server answers ``/`` (the page) and ``/version`` (a fingerprint of the run
directories' files); the page polls ``/version`` and reloads itself when it
changes, keeping its place.  It binds 127.0.0.1 (or ::1) only: the page shows
prompts, outputs and paths that are nobody else's business.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rgym_view.html import fingerprint, write_viewer

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ViewerServer:
    """Serves ``output`` and rebuilds it from ``paths`` when their runs change."""

    def __init__(self, paths: Sequence[Path], output: Path, *, host: str = "127.0.0.1", port: int = 0,
                 poll_s: float = 2.0, build: Callable[[], object] | None = None) -> None:
        if host not in LOOPBACK:
            raise ValueError(f"--host: the viewer serves on loopback only (127.0.0.1 or ::1), not {host!r}")
        self.paths = [Path(p) for p in paths]
        self.output = Path(output)
        self.poll_s = poll_s
        self._build = build or (lambda: write_viewer(self.paths, self.output, live=True))
        self.version = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    with server._lock:
                        body = server.output.read_bytes()
                    self._send(200, body, "text/html; charset=utf-8")
                elif path == "/version":
                    self._send(200, server.version.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        cls = http.server.ThreadingHTTPServer
        if ":" in host:
            import socket

            class V6(http.server.ThreadingHTTPServer):
                address_family = socket.AF_INET6

            cls = V6
        self.httpd = cls((host, port), Handler)
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        address = self.httpd.server_address
        host, port = str(address[0]), int(address[1])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    def rebuild_if_changed(self) -> bool:
        """Rebuild the page when the runs changed; True when it did."""
        current = fingerprint(self.paths)
        if current == self.version:
            return False
        with self._lock:
            self._build()
            self.version = fingerprint(self.paths)
        return True

    def watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.rebuild_if_changed()
            except Exception:  # noqa: BLE001 - a half-written run is read again next time
                continue

    def start(self) -> None:
        """Build once, then serve and watch in background threads."""
        self.rebuild_if_changed()
        threading.Thread(target=self.httpd.serve_forever, name="rgym-view-http", daemon=True).start()
        threading.Thread(target=self.watch, name="rgym-view-watch", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` (or ``timeout`` seconds); True once stopped."""
        return self._stop.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve_forever(self) -> None:
        self.start()
        try:
            while True:
                time.sleep(3600)
        finally:
            self.stop()

"""An attached ``docker exec`` session over the engine's hijacked socket.

Without a TTY the engine multiplexes stdout and stderr on one stream: each frame
is an 8-byte header (stream id, three zero bytes, big-endian payload length)
followed by the payload.  :class:`ExecStream` writes to the process's stdin and
reads the demultiplexed output with deadlines, without a thread.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxI")


class StreamClosed(EOFError):
    """The process behind the stream ended (or the connection broke)."""


class ExecStream:
    """One process started with ``exec_create(stdin=True, tty=False)`` and attached."""

    def __init__(self, api: Any, container_id: str, argv: list[str], *, user: str = "",
                 workdir: str | None = None, environment: Mapping[str, str] | None = None) -> None:
        self.api = api
        created = api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True,
                                  tty=False, user=user, workdir=workdir,
                                  environment=dict(environment or {}))
        self.exec_id: str = created["Id"]
        self._wrapper = api.exec_start(self.exec_id, socket=True)
        self._sock: socket.socket = getattr(self._wrapper, "_sock", self._wrapper)
        self._sock.setblocking(False)
        self._raw = bytearray()
        self.closed = False

    # -- writing ---------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send ``data`` to the process's stdin (blocking until all is written)."""
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                select.select([], [self._sock], [], 1.0)
                continue
            except OSError as exc:
                self.closed = True
                raise StreamClosed(str(exc)) from exc
            view = view[sent:]

    def close_stdin(self) -> None:
        """Half-close the connection: the process reads end-of-file."""
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    # -- reading ---------------------------------------------------------------

    def read_frames(self, deadline: float | None) -> list[tuple[int, bytes]]:
        """Wait until at least one frame arrives (or ``deadline``, a ``time.monotonic``
        value, passes: then return ``[]``).  Raises :class:`StreamClosed` at EOF."""
        while True:
            frames = self._parse()
            if frames:
                return frames
            if self.closed:
                raise StreamClosed("exec stream closed")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._sock], [], [], wait)
            if not ready:
                return []
            try:
                chunk = self._sock.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                frames = self._parse()
                if frames:
                    return frames
                raise StreamClosed("exec stream closed")
            self._raw += chunk

    def _parse(self) -> list[tuple[int, bytes]]:
        frames = []
        raw = self._raw
        pos = 0
        while len(raw) - pos >= _HEADER.size:
            stream, size = _HEADER.unpack_from(raw, pos)
            if len(raw) - pos - _HEADER.size < size:
                break
            start = pos + _HEADER.size
            frames.append((stream, bytes(raw[start:start + size])))
            pos = start + size
        if pos:
            del raw[:pos]
        return frames

    def exit_code(self) -> int | None:
        """The process's exit status once it ended, else ``None``."""
        info = self.api.exec_inspect(self.exec_id)
        return None if info.get("Running") else info.get("ExitCode")

    def pid(self) -> int | None:
        return self.api.exec_inspect(self.exec_id).get("Pid")

    def close(self) -> None:
        self.closed = True
        for obj in (self._sock, self._wrapper):
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - closing twice or a half-dead socket
                pass


class Collected(NamedTuple):
    """What :func:`run_collect` gathered."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    merged: bytes
    timed_out: bool


def run_collect(api: Any, container_id: str, argv: list[str], *, user: str = "",
                workdir: str | None = None, environment: Mapping[str, str] | None = None,
                input: bytes | None = None, timeout: float | None = None) -> Collected:
    """Run one process to completion, feeding ``input``.  ``merged`` holds stdout and
    stderr in arrival order.  On timeout the stream is closed and the exit code is
    ``None`` (the caller kills the process inside the container)."""
    stream = ExecStream(api, container_id, argv, user=user, workdir=workdir,
                        environment=environment)
    out, err, merged = bytearray(), bytearray(), bytearray()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        if input:
            stream.write(input)
        stream.close_stdin()
        while True:
            try:
                frames = stream.read_frames(deadline)
            except StreamClosed:
                break
            if not frames:
                return Collected(None, bytes(out), bytes(err), bytes(merged), True)
            for kind, payload in frames:
                (err if kind == STDERR else out).extend(payload)
                merged.extend(payload)
    finally:
        stream.close()
    code = None
    for _ in range(200):
        code = stream.exit_code()
        if code is not None:
            break
        time.sleep(0.01)
    return Collected(code, bytes(out), bytes(err), bytes(merged), False)

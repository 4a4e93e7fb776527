"""The wire protocol between the runner and an agent scaffold in its own process.

``rgym run --agent-isolation process`` starts the scaffold as
``python -I -m rgym_core.agent_process.child`` (confined: see
:mod:`rgym_core.isolation.agent_confinement`) and talks to it over two pipes, the
child's standard input (runner -> scaffold) and standard output (scaffold ->
runner).  What the scaffold prints goes to its standard error, which the runner
keeps (head and tail) in ``agent_process.log`` in the run directory.

Framing: one JSON object per line, UTF-8, ``\\n``-terminated (JSON escapes
newlines inside strings).  A line longer than the message limit
(:data:`MAX_MESSAGE_BYTES`, 64 MiB) or one that is not a JSON object ends the
episode with an agent error.  Protocol version: :data:`PROTOCOL_VERSION`.

Runner -> scaffold (each waits for the one answer named; the scaffold may send
``call`` messages before it)::

    {"type": "init", "protocol": 1, "agent": {"name", "plugin", "distribution"},
     "config": {"model", "base_url", "seed", "options", "task_id"}, "budget": BUDGET}
        -> {"type": "ready"}                 the factory built the agent
    {"type": "start", "context": CONTEXT, "status": STATUS}
        -> {"type": "started"}
    {"type": "act", "observation": OBSERVATION, "status": STATUS}
        -> {"type": "action", "action": ACTION}
        |  {"type": "stop", "reason": REASON, "message", "error_type", "traceback", "llm_calls"}
    {"type": "close"}
        -> {"type": "closed"}                then the process exits

Any of those may instead be answered ``{"type": "failed", "message", "error_type",
"traceback"}``: the scaffold raised (``init``: the run stops before it starts with
the message; ``start``/``act``: the episode ends as an agent error and is graded).

Scaffold -> runner requests, answered before anything else::

    {"type": "call", "id": N, "method": "model.create",
     "params": {"model", "base_url", "options"}}
        -> {"type": "result", "id": N, "result": {"client": K, "model", "provider", "price"}}
    {"type": "call", "id": N, "method": "model.complete",
     "params": {"client": K, "messages", "tools", "max_tokens", "temperature"}}
        -> {"type": "result", "id": N, "result": RESPONSE}
    either -> {"type": "result", "id": N, "error": {"kind", "message", "error_type", "budget"}}

The runner makes the model call with the LLM plugin (the scaffold never holds an
API key and has no network), checks the episode's cost and token limits before
each call and counts the usage itself: ``kind`` ``budget`` (with ``budget``:
``cost`` or ``tokens``) means the call would cross a limit; ``model``: the
provider failed (``error_type`` names the exception class); ``refused``: the
request is not allowed (another model or endpoint than the user chose, an option
such as ``api_key_env`` or ``prices`` the user did not give).

Payloads: ``CONTEXT`` is :class:`rgym_core.agents.TaskContext` as plain data
without ``status``, ``run_dir`` and ``scripted_actions`` (only the core's own
agents get those); ``OBSERVATION`` and ``ACTION`` are the records of
:mod:`rgym_core.records` as plain data (the scaffold's ``usage`` and ``llm_calls``,
and a ``stop``'s ``llm_calls``, are ignored: the runner counts the usage and records
the calls it made itself; what the scaffold claims is only noted, as unverified, in
``agent_process.log``); ``STATUS`` is ``{"steps", "elapsed_s", "usage": USAGE,
"snapshot": {...}}``, the live counters behind ``TaskContext.status``; ``RESPONSE``
is :class:`rgym_core.models.ModelResponse` as plain data; ``BUDGET`` is
:class:`rgym_core.specs.Budget` as plain data; ``REASON`` is ``cost``,
``tokens``, ``time``, ``max_steps`` (a :class:`~rgym_core.agents.BudgetExceeded`),
``format_error`` (an :class:`~rgym_core.agents.AgentFormatError`) or
``agent_error`` (any other exception).
"""

from __future__ import annotations

import errno
import json
import os
import select
import time
from typing import Any

#: The protocol version both sides speak (``init`` carries it).
PROTOCOL_VERSION = 1
#: The largest message either side accepts (bytes, the newline excluded).
MAX_MESSAGE_BYTES = 64 << 20
#: Environment variable overriding :data:`MAX_MESSAGE_BYTES` on the runner's side.
MAX_MESSAGE_VAR = "RGYM_AGENT_MAX_MESSAGE_BYTES"

#: Why a scaffold may stop an episode (``stop`` messages).
STOP_REASONS = ("cost", "tokens", "time", "max_steps", "format_error", "agent_error")


class ProtocolError(RuntimeError):
    """The other side broke the protocol: garbage, an oversized or unexpected
    message, a closed pipe, or silence past a deadline.  The message is written
    for the person reading the run's result."""


class ChannelTimeout(ProtocolError):
    """Nothing (or not the whole message) arrived before the deadline."""


class ChannelClosed(ProtocolError):
    """The other side closed its end (the process exited)."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as a protocol line (compact JSON + newline)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one protocol line; :class:`ProtocolError` unless it is a JSON object
    with a string ``type``."""
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        shown = line[:120].decode("utf-8", "replace")
        raise ProtocolError(f"the agent process wrote something that is not a protocol message "
                            f"(a JSON object per line): {shown!r}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        shown = line[:120].decode("utf-8", "replace")
        raise ProtocolError(f"the agent process wrote a message without a 'type': {shown!r}")
    return message


class Channel:
    """A bounded, deadline-aware line channel over two file descriptors.

    Reads never block past a deadline and never buffer more than ``max_bytes``
    for one message; writes never block past a deadline either (the other side
    may stop reading).  Used by the runner, which must survive any child.
    """

    def __init__(self, read_fd: int, write_fd: int, *, max_bytes: int | None = None) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_bytes = max_bytes if max_bytes is not None else _max_from_env()
        self._buffer = bytearray()
        self._eof = False
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)

    def send(self, message: dict[str, Any], *, deadline: float | None = None) -> None:
        """Write one message; :class:`ChannelTimeout` when the other side does not
        take it before ``deadline`` (``time.monotonic()`` seconds)."""
        data = memoryview(encode(message))
        while data:
            wait = _remaining(deadline)
            try:
                _, ready, _ = select.select([], [self.write_fd], [], wait)
            except InterruptedError:  # pragma: no cover - PEP 475 retries select
                continue
            if not ready:
                raise ChannelTimeout("the agent process stopped reading its input")
            try:
                written = os.write(self.write_fd, data)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise ChannelClosed("the agent process closed its input (it has exited)") from None
            data = data[written:]

    def receive(self, *, deadline: float | None = None) -> dict[str, Any]:
        """The next message; :class:`ChannelTimeout` at ``deadline``,
        :class:`ChannelClosed` at end of file, :class:`ProtocolError` for garbage
        or a message over the size limit."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[:newline + 1]
                if len(line) > self.max_bytes:
                    raise ProtocolError(self._too_long())
                if not line.strip():
                    continue
                return decode(line)
            if len(self._buffer) > self.max_bytes:
                raise ProtocolError(self._too_long())
            if self._eof:
                if self._buffer:
                    shown = bytes(self._buffer[:120]).decode("utf-8", "replace")
                    raise ChannelClosed(f"the agent process exited in the middle of a message: "
                                        f"{shown!r}")
                raise ChannelClosed("the agent process closed its output (it has exited)")
            wait = _remaining(deadline)
            try:
                ready, _, _ = select.select([self.read_fd], [], [], wait)
            except InterruptedError:  # pragma: no cover
                continue
            if not ready:
                raise ChannelTimeout("no message from the agent process in time")
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):
                    self._eof = True
                    continue
                raise
            if not chunk:
                self._eof = True
            else:
                self._buffer += chunk

    def _too_long(self) -> str:
        return (f"the agent process sent a message over the {self.max_bytes // (1 << 20)} MiB "
                f"limit ({MAX_MESSAGE_VAR})")

    def close(self) -> None:
        for fd in {self.read_fd, self.write_fd}:
            try:
                os.close(fd)
            except OSError:
                pass


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def _max_from_env() -> int:
    value = os.environ.get(MAX_MESSAGE_VAR, "").strip()
    if not value:
        return MAX_MESSAGE_BYTES
    try:
        parsed = int(value)
    except ValueError:
        raise ValueError(f"{MAX_MESSAGE_VAR}={value!r}: expected a number of bytes") from None
    if parsed < 1024:
        raise ValueError(f"{MAX_MESSAGE_VAR}={value!r}: must be at least 1024")
    return parsed


def error_payload(exc: BaseException, *, traceback_text: str | None = None) -> dict[str, Any]:
    """``message``, ``error_type`` (``module.Class``) and ``traceback`` of an exception."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return {"message": str(exc), "error_type": name, "traceback": traceback_text}


__all__ = ["MAX_MESSAGE_BYTES", "MAX_MESSAGE_VAR", "PROTOCOL_VERSION", "STOP_REASONS", "Channel",
           "ChannelClosed", "ChannelTimeout", "ProtocolError", "decode", "encode", "error_payload"]

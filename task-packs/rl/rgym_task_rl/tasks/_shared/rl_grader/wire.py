"""Length-prefixed frames between the grader and the policy worker.

A frame is a JSON header (4-byte big-endian length, then UTF-8 JSON) followed by
a binary payload (8-byte big-endian length, then raw bytes, possibly empty).
Arrays travel as raw C-ordered bytes, described by ``dtype`` and ``shape`` in the
header.  This file is plain standard library: the grader imports it, and its text
is prepended to the worker script, which runs confined without the grader folder.
"""

import json
import os
import struct

MAX_HEADER = 1 << 16


class WireError(Exception):
    """The peer closed the stream or sent something that is not a frame."""


def write_frame(fd, header, payload=b""):
    data = json.dumps(header).encode()
    blob = struct.pack(">I", len(data)) + data + struct.pack(">Q", len(payload))
    _write_all(fd, blob)
    if payload:
        _write_all(fd, payload)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        sent = os.write(fd, view)
        view = view[sent:]


def read_frame(read_exact, max_payload):
    """Read one frame with ``read_exact(n) -> bytes``; payloads above
    ``max_payload`` bytes are refused before they are read."""
    (size,) = struct.unpack(">I", read_exact(4))
    if size > MAX_HEADER:
        raise WireError(f"a frame header of {size} bytes (the limit is {MAX_HEADER})")
    try:
        header = json.loads(read_exact(size).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"a frame header that is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("a frame header that is not a JSON object")
    (length,) = struct.unpack(">Q", read_exact(8))
    if length > max_payload:
        raise WireError(f"a payload of {length} bytes (at most {max_payload} expected)")
    return header, read_exact(length) if length else b""


def blocking_reader(fd):
    """``read_exact`` for a blocking file descriptor."""
    def read_exact(n):
        chunks, left = [], n
        while left:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise WireError("the stream closed")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    return read_exact

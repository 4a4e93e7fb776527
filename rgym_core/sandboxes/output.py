"""Command output for every sandbox backend: one collector, one truncation marker.

A backend feeds raw bytes to :class:`OutputCollector` as they arrive; the
collector keeps only a head and a tail within the character cap (so a command
that prints gigabytes costs bounded memory) and :meth:`OutputCollector.text`
returns exactly what :func:`truncate_output` would return for the whole output.
"""

from __future__ import annotations

_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def truncation_marker(cut: int) -> str:
    """The line put where ``cut`` characters of output were left out."""
    return (f"\n[... {cut} characters truncated; redirect output to a file and read it "
            "in parts ...]\n")


def truncate_output(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head (two thirds) and tail of ``text`` within ``limit`` characters,
    with :func:`truncation_marker` in the middle; ``(text, was_truncated)``."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return text[:head] + truncation_marker(cut) + text[len(text) - tail:], True


class OutputCollector:
    """Gathers a command's output bytes, keeping a head and a tail within ``limit``
    characters (0: keep everything)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        head_chars = limit * 2 // 3
        # UTF-8 needs at most 4 bytes a character; keep some slack for the tail.
        self.head_cap = 4 * head_chars + 4
        self.tail_cap = 4 * (limit - head_chars) + 16384
        self.head: bytes | None = None
        self.buf = bytearray()
        self.dropped_chars = 0
        self.total_bytes = 0

    def feed(self, chunk: bytes) -> None:
        """Add output."""
        self.buf += chunk
        self.total_bytes += len(chunk)
        if self.limit > 0 and len(self.buf) > self.head_cap + 2 * self.tail_cap:
            self._trim()

    def _trim(self) -> None:
        buf = self.buf
        if self.head is None:
            cut = self.head_cap
            while cut > 0 and buf[cut] & 0xC0 == 0x80:
                cut -= 1
            self.head = bytes(buf[:cut])
            del buf[:cut]
        excess = len(buf) - self.tail_cap
        while excess < len(buf) and buf[excess] & 0xC0 == 0x80:
            excess += 1
        self.dropped_chars += len(bytes(buf[:excess]).translate(None, _CONTINUATION_BYTES))
        del buf[:excess]

    def text(self) -> tuple[str, bool]:
        """The output, truncated as :func:`truncate_output` does: ``(text, truncated)``."""
        if self.head is None:
            text = self.buf.decode("utf-8", "replace")
            return truncate_output(text, self.limit) if self.limit > 0 else (text, False)
        head = self.head.decode("utf-8", "replace")
        tail = self.buf.decode("utf-8", "replace")
        h = self.limit * 2 // 3
        t = self.limit - h
        cut = len(head) + self.dropped_chars + len(tail) - h - t
        return head[:h] + truncation_marker(cut) + tail[len(tail) - t:], True

"""Server-sent events: the framing both OpenAI and Anthropic streams use."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from attrs import define


@define
class SSEEvent:
    """One event: its ``event:`` name (empty when unnamed) and joined ``data:`` lines."""

    event: str
    data: str


def iter_sse(lines: Iterable[str]) -> Iterator[SSEEvent]:
    """Events from the lines of a ``text/event-stream`` body (without line ends).

    A blank line ends an event; ``:`` lines are comments (keep-alives); an event
    left open at the end of the stream is still delivered.
    """
    event = ""
    data: list[str] = []
    for line in lines:
        line = line.rstrip("\r")
        if not line:
            if data:
                yield SSEEvent(event, "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield SSEEvent(event, "\n".join(data))

"""History processing: keep the last N observations in full, elide the older ones
(MLGym's ``LastNObservations``), so long episodes fit the context window."""

from __future__ import annotations

from typing import Any

from attrs import define, field


@define
class Entry:
    """One message of the conversation and whether it is an observation."""

    message: dict[str, Any]
    observation: bool = False


@define
class History:
    """The conversation after the system prompt."""

    keep: int = 5
    entries: list[Entry] = field(factory=list)

    def add(self, message: dict[str, Any], *, observation: bool = False) -> None:
        self.entries.append(Entry(message, observation))

    def messages(self) -> list[dict[str, Any]]:
        """The messages to send: observations older than the last ``keep`` are
        replaced by a one-line note (a tool result keeps its ``tool_call_id``)."""
        observations = [i for i, e in enumerate(self.entries) if e.observation]
        elide = set(observations[:-self.keep] if self.keep > 0 else observations)
        out: list[dict[str, Any]] = []
        for i, entry in enumerate(self.entries):
            if i in elide:
                text = str(entry.message.get("content") or "")
                lines = text.count("\n") + 1 if text else 0
                out.append({**entry.message, "content": f"Old output omitted ({lines} lines)."})
            else:
                out.append(entry.message)
        return out

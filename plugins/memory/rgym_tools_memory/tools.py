"""The ``memory_write`` and ``memory_read`` tools (host-side, namespace ``memory``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rgym_core import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema

if TYPE_CHECKING:
    from rgym_tools_memory.store import SearchHit

# numpy, faiss and the embedder load when an episode opens its memory, not when
# rgym registers the tools (every command does that).

MAX_K = 50
#: Characters of one memory shown by memory_read before it is cut.
SHOW_CHARS = 2000
STATUS_TAGS = 10


class _MemoryTool(Tool):
    namespace = "memory"
    default = False

    def start(self, ctx: ToolContext) -> None:
        _session(ctx)

    def stop(self, ctx: ToolContext) -> None:
        from rgym_tools_memory.session import close_session

        close_session(ctx)

    def status(self, ctx: ToolContext) -> dict[str, Any]:
        store = _session(ctx).store
        return {"memory_count": store.count, "memory_tags": store.top_tags(STATUS_TAGS)}

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:  # pragma: no cover
        raise NotImplementedError


def _session(ctx: ToolContext) -> Any:
    from rgym_tools_memory.persistence import MemoryPersistenceError
    from rgym_tools_memory.session import open_session

    try:
        return open_session(ctx)
    except (ValueError, MemoryPersistenceError) as exc:
        raise ToolError(str(exc)) from exc


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class MemoryWriteTool(_MemoryTool):
    """Store a note in the episode's long-term memory."""

    schema = ToolSchema(
        name="memory_write",
        description="Save a note (a finding, a result, a failed idea) to your long-term memory "
                    "so that memory_read can find it later by meaning; optional tags "
                    "(comma-separated) group notes.",
        args=[ToolArg("text", "string", "the note to remember"),
              ToolArg("tags", "array", "tags for the note, e.g. results,lr", required=False,
                      default=None, items="string")],
    )

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        session = _session(ctx)
        store = session.store
        started = time.perf_counter()
        try:
            id_, record = store.write(args["text"], args.get("tags"), episode_id=ctx.episode_id,
                                      step=ctx.step)
        except ValueError as exc:
            raise ToolError(f"memory_write: {exc}") from None
        latency = time.perf_counter() - started
        ctx.record("memory", {"op": "write", "id": id_, "uid": record.uid,
                              "tags": list(record.tags), "chars": len(record.text),
                              "count": store.count, "index": store.index.mode,
                              "latency_ms": _ms(latency),
                              "embed_ms": _ms(store.last_timings.get("embed", 0.0)),
                              "index_ms": _ms(store.last_timings.get("index", 0.0))})
        tags = f" with tags {', '.join(record.tags)}" if record.tags else ""
        return ToolResult(output=f"Saved memory #{id_}{tags}. Memory now holds {store.count} "
                                 f"note{'s' if store.count != 1 else ''}.",
                          info={"memory_id": id_})


class MemoryReadTool(_MemoryTool):
    """Find the stored notes closest in meaning to a query."""

    schema = ToolSchema(
        name="memory_read",
        description="Search your long-term memory for the notes closest in meaning to a query; "
                    "prints each with its similarity score (cosine, 1 = same meaning) and tags. "
                    "With tags, only notes carrying at least one of them are searched.",
        args=[ToolArg("query", "string", "what to look for"),
              ToolArg("k", "integer", f"how many notes to return (1-{MAX_K})", required=False,
                      default=5),
              ToolArg("tags", "array", "only notes with one of these tags", required=False,
                      default=None, items="string")],
    )

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        session = _session(ctx)
        store = session.store
        k = 5 if args.get("k") is None else int(args["k"])
        if not 1 <= k <= MAX_K:
            raise ToolError(f"memory_read: k must be between 1 and {MAX_K}, got {k}")
        started = time.perf_counter()
        try:
            hits = store.read(args["query"], k, args.get("tags"))
        except ValueError as exc:
            raise ToolError(f"memory_read: {exc}") from None
        latency = time.perf_counter() - started
        ctx.record("memory", {"op": "read", "k": k, "tags": list(args.get("tags") or []),
                              "returned": len(hits), "count": store.count,
                              "top_score": round(hits[0].score, 4) if hits else None,
                              "ids": [h.id for h in hits], "index": store.index.mode,
                              "latency_ms": _ms(latency),
                              "embed_ms": _ms(store.last_timings.get("embed", 0.0)),
                              "search_ms": _ms(store.last_timings.get("search", 0.0))})
        return ToolResult(output=render_hits(hits, store.count, args.get("tags")),
                          info={"memory_ids": [h.id for h in hits]})


def render_hits(hits: list[SearchHit], count: int, tags: Any = None) -> str:
    """The agent-facing text of a memory_read result."""
    scope = f" with tags {', '.join(tags) if isinstance(tags, list) else tags}" if tags else ""
    if count == 0:
        return "Memory is empty: save notes with memory_write first."
    if not hits:
        return f"No memories{scope} (memory holds {count} notes)."
    lines = [f"{len(hits)} of {count} memories{scope}, most similar first:"]
    for rank, hit in enumerate(hits, 1):
        rec = hit.record
        meta = f"score {hit.score:.3f}"
        if rec.tags:
            meta += f" | tags: {', '.join(rec.tags)}"
        if rec.step is not None:
            meta += f" | step {rec.step}"
        text = rec.text
        if len(text) > SHOW_CHARS:
            text = text[:SHOW_CHARS] + f" [... {len(rec.text) - SHOW_CHARS} more characters cut]"
        lines.append(f"[{rank}] #{hit.id} ({meta})\n{text}")
    return "\n".join(lines)


def memory_tools() -> list[Tool]:
    """Fresh instances of both memory tools."""
    return [MemoryWriteTool(), MemoryReadTool()]

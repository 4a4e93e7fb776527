"""The ``read_pdf`` tool: the text of a PDF from a URL or the workspace, run host-side.

URLs are downloaded on the host (so the sandbox's network can stay off) under a
size cap, with the content-type check, the shared retry policy and the URL
guard; workspace paths are read through the sandbox as the agent user.  Long
output is cut at a page boundary with a marker giving the exact command for
the rest.  Each call records its facts under ``pdf`` in the step's info.
"""

from __future__ import annotations

import os
import shlex
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from rgym_core import KNOWN_KEYS as LEAKAGE_KEYS
from rgym_core import (
    LeakageConfigError,
    RequestFailed,
    RetryPolicy,
    Tool,
    ToolArg,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSchema,
    task_policy,
)
from rgym_tools_pdf.download import NotAPdf, download_pdf, looks_like_pdf
from rgym_tools_pdf.extract import PdfError, open_pdf, page_text
from rgym_tools_pdf.netguard import BlockedURL, URLGuard
from rgym_tools_pdf.pages import format_pages, parse_pages

CONFIG_KEY = "pdf"
DEFAULT_MAX_BYTES = 50_000_000
DEFAULT_MAX_CHARS = 20_000
#: Downloads kept per episode, so reading a paper in parts downloads it once.
KEPT_DOWNLOADS = 4
_OWN_KEYS = ("max_bytes", "max_chars", "allow_private_hosts")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _positive_int(config: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ToolError(f"{where}.{key}: expected a positive integer, got {value!r} "
                        "(fix the task's task.yaml)")
    return value


class ReadPdfTool(Tool):
    """Read the text of a PDF from an http(s) URL or a workspace path."""

    schema = ToolSchema(
        name="read_pdf",
        description="Read the text of a PDF, from an http(s) URL (e.g. an open-access PDF link "
                    "from literature_search) or a file in your workspace. Long documents are "
                    "shown in parts; the output says how to read the rest.",
        args=[
            ToolArg("source", "string", "an http(s) URL or a workspace path of a PDF"),
            ToolArg("pages", "string", "pages to read, like \"1-3,5\" or \"4-\" (default: all, "
                    "up to the output limit)", required=False),
        ],
    )
    namespace = "pdf"
    default = False

    def __init__(self, *, policy: RetryPolicy | None = None,
                 allow_private_hosts: bool | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.policy = policy or RetryPolicy()
        self._allow_private_hosts = allow_private_hosts
        self._sleep = sleep

    # -- configuration -------------------------------------------------
    def _settings(self, ctx: ToolContext) -> dict[str, Any]:
        cached = ctx.state.get("pdf.settings")
        if isinstance(cached, dict):
            return cached
        own = ctx.tool_config or (ctx.task.tool_config or {}).get(CONFIG_KEY) or {}
        where = f"{ctx.task.id}: tool_config.{CONFIG_KEY}"
        if not isinstance(own, Mapping):
            raise ToolError(f"{where}: expected a mapping of settings, got {own!r}")
        unknown = sorted(set(own) - set(_OWN_KEYS) - set(LEAKAGE_KEYS))
        if unknown:
            raise ToolError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known keys: "
                            f"{', '.join(sorted(_OWN_KEYS + LEAKAGE_KEYS))} (fix the task's "
                            "task.yaml)")
        config = dict(ctx.task.tool_config or {})
        config[CONFIG_KEY] = own
        try:
            # The task's shared policy, the literature tool's (a paper hidden from search is
            # hidden from reading too) and this tool's own keys.
            policy = task_policy(config, CONFIG_KEY, task_id=ctx.task.id, base_dir=ctx.task.root,
                                 tool_keys=_OWN_KEYS)
            literature = config.get("literature")
            if isinstance(literature, Mapping):
                policy = policy.merged(task_policy(
                    {"literature": {k: v for k, v in literature.items() if k in LEAKAGE_KEYS}},
                    "literature", task_id=ctx.task.id, base_dir=ctx.task.root))
        except LeakageConfigError as exc:
            raise ToolError(f"{exc} (fix the task's task.yaml)") from None
        allow = own.get("allow_private_hosts", False)
        if not isinstance(allow, bool):
            raise ToolError(f"{where}.allow_private_hosts: expected true or false, got {allow!r}")
        if self._allow_private_hosts is not None:
            allow = self._allow_private_hosts
        allow = allow or _truthy(os.environ.get("RGYM_PDF_ALLOW_PRIVATE_HOSTS"))
        settings = {
            "max_bytes": _positive_int(own, "max_bytes", DEFAULT_MAX_BYTES, where),
            "max_chars": _positive_int(own, "max_chars", DEFAULT_MAX_CHARS, where),
            "guard": URLGuard(policy, allow_private_hosts=allow),
        }
        ctx.state["pdf.settings"] = settings
        return settings

    def start(self, ctx: ToolContext) -> None:
        """Check the task's settings before the first action."""
        self._settings(ctx)

    # -- the call ------------------------------------------------------
    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        source = str(args["source"]).strip()
        if not source:
            raise ToolError("read_pdf: the source is empty; usage: " + self.schema.usage())
        settings = self._settings(ctx)
        is_url = source.lower().startswith(("http://", "https://"))
        if not is_url and "://" in source:
            raise ToolError(f"read_pdf: cannot read {source!r}: give an http(s) URL or a "
                            "workspace path")
        facts: dict[str, Any] = {"source": source, "kind": "url" if is_url else "workspace",
                                 "pages_requested": args.get("pages")}
        started = time.monotonic()
        try:
            data = (self._fetch(source, settings, ctx, facts) if is_url
                    else self._read_workspace(source, settings, ctx))
            facts["bytes"] = len(data)
            reader = open_pdf(data, source)
            total = len(reader.pages)
            facts["pages_total"] = total
            pages = parse_pages(args.get("pages"), total)
        except (RequestFailed, NotAPdf, BlockedURL, PdfError, ToolError) as exc:
            message = str(exc).removeprefix("read_pdf: ")
            facts.update(outcome="error", error=message,
                         latency_s=round(time.monotonic() - started, 4))
            if isinstance(exc, RequestFailed):
                facts["attempts"] = exc.attempts
            if isinstance(exc, BlockedURL) and "leakage" in message:
                facts["withheld"] = 1
            ctx.record(CONFIG_KEY, facts)
            return ToolResult(output=f"read_pdf failed: {message}", error=True)
        text, shown, rest = self._render(reader, source, pages, settings["max_chars"])
        facts.update(outcome="ok", pages_shown=format_pages(shown), truncated=bool(rest),
                     chars=len(text), latency_s=round(time.monotonic() - started, 4))
        ctx.record(CONFIG_KEY, facts)
        return ToolResult(output=text, info={"pages_total": total,
                                             "pages_shown": format_pages(shown)})

    def _fetch(self, url: str, settings: dict[str, Any], ctx: ToolContext,
               facts: dict[str, Any]) -> bytes:
        kept: OrderedDict[str, bytes] = ctx.state.setdefault("pdf.downloads", OrderedDict())
        if url in kept:
            kept.move_to_end(url)
            facts["cache"] = "hit"
            return kept[url]
        settings["guard"].check(url)
        download = download_pdf(url, max_bytes=settings["max_bytes"], guard=settings["guard"],
                                policy=self.policy, sleep=self._sleep)
        facts.update(cache="miss", attempts=download.attempts, content_type=download.content_type)
        if download.url != url:
            facts["final_url"] = download.url
        kept[url] = download.data
        while len(kept) > KEPT_DOWNLOADS:
            kept.popitem(last=False)
        return download.data

    def _read_workspace(self, path: str, settings: dict[str, Any], ctx: ToolContext) -> bytes:
        try:
            data = ctx.sandbox.read_file(path)
        except FileNotFoundError:
            raise ToolError(f"no such file in the workspace: {path}") from None
        except IsADirectoryError:
            raise ToolError(f"{path} is a folder, not a PDF file") from None
        except PermissionError:
            raise ToolError(f"permission denied reading {path}") from None
        if len(data) > settings["max_bytes"]:
            raise ToolError(f"{path} is {len(data) / 1e6:.1f} MB, over the "
                            f"{settings['max_bytes'] / 1e6:.1f} MB limit")
        if not looks_like_pdf(data):
            raise ToolError(f"{path} is not a PDF (it does not start with %PDF)")
        return data

    def _render(self, reader: Any, source: str, pages: list[int],
                max_chars: int) -> tuple[str, list[int], list[int]]:
        total = len(reader.pages)
        header = (f"PDF {source}: {total} page{'s' if total != 1 else ''}; "
                  f"pages {format_pages(pages)} requested.")
        parts = [header]
        used = len(header)
        shown: list[int] = []
        note = ""
        for i, number in enumerate(pages):
            block = f"--- page {number} of {total} ---\n{page_text(reader, number)}"
            if used + len(block) + 2 > max_chars:
                rest = pages[i:]
                if not shown:  # a single page longer than the limit: show its start
                    room = max(0, max_chars - used - 2)
                    parts.append(block[:room])
                    shown.append(number)
                    rest = pages[i + 1:]
                    note = (f"[page {number} is longer than the {max_chars}-character output "
                            f"limit and was cut after {room} characters.")
                    if rest:
                        note += (" Read the following pages with: read_pdf "
                                 f"{shlex.quote(source)} {format_pages(rest)}]")
                    else:
                        note += "]"
                    parts.append(note)
                    return "\n\n".join(parts), shown, rest
                note = (f"[output truncated at the {max_chars}-character limit after page "
                        f"{shown[-1]}; pages {format_pages(rest)} not shown. Read them with: "
                        f"read_pdf {shlex.quote(source)} {format_pages(rest)}]")
                parts.append(note)
                return "\n\n".join(parts), shown, rest
            parts.append(block)
            used += len(block) + 2
            shown.append(number)
        return "\n\n".join(parts), shown, []

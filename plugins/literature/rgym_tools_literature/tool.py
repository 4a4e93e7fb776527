"""The ``literature_search`` tool: Semantic Scholar paper search, run host-side.

The tool runs on the host, so the episode's sandbox can keep its network off.
Every call records its facts under ``literature`` in the step's observation
info (query, years, results shown, withheld count and reasons, latency, cache
hit or miss, HTTP requests and attempts, outcome); the API key is never recorded.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgym_core import (
    LeakageConfigError,
    LeakagePolicy,
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
from rgym_tools_literature.cache import SearchCache, default_cache_dir, ttl_from_env
from rgym_tools_literature.client import (
    MAX_PAGE_SIZE,
    ScholarResponseError,
    SearchResult,
    SemanticScholarClient,
    api_key_from_env,
    base_url_from_env,
)
from rgym_tools_literature.leakage import withhold_reason
from rgym_tools_literature.render import render_results, withheld_note

#: Most results one call may ask for.
MAX_LIMIT = 100
CONFIG_KEY = "literature"


class LiteratureSearchTool(Tool):
    """Search Semantic Scholar for papers, withholding what the task's leakage policy hides.

    Constructor arguments are for tests and embedding; the defaults read
    ``RGYM_S2_BASE_URL``, ``S2_API_KEY``/``SEMANTIC_SCHOLAR_API_KEY``,
    ``RGYM_CACHE_DIR`` and ``RGYM_LITERATURE_CACHE_TTL_S``.
    """

    schema = ToolSchema(
        name="literature_search",
        description="Search published papers (Semantic Scholar) by keywords. Shows title, year, "
                    "venue, citations, first authors, ids, open-access PDF link and the start of "
                    "the abstract. Quote multi-word queries.",
        args=[
            ToolArg("query", "string", "keywords, e.g. \"sparse mixture of experts routing\""),
            ToolArg("limit", "integer", f"how many papers to show (1-{MAX_LIMIT})",
                    required=False, default=10),
            ToolArg("year_from", "integer", "earliest publication year", required=False),
            ToolArg("year_to", "integer", "latest publication year", required=False),
        ],
    )
    namespace = "literature"
    default = False

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None,
                 cache_dir: Path | None = None, cache_ttl_s: float | None = None,
                 policy: RetryPolicy | None = None, page_size: int = MAX_PAGE_SIZE,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._base_url = base_url
        self._api_key = api_key
        self._cache_dir = cache_dir
        self._cache_ttl_s = cache_ttl_s
        self.policy = policy or RetryPolicy()
        self.page_size = page_size
        self._sleep = sleep

    # -- configuration -------------------------------------------------
    def leakage_policy(self, ctx: ToolContext) -> LeakagePolicy:
        """The task's policy (``tool_config.leakage`` and ``tool_config.literature``);
        cached per episode."""
        cached = ctx.state.get("literature.policy")
        if isinstance(cached, LeakagePolicy):
            return cached
        config = dict(ctx.task.tool_config or {})
        if ctx.tool_config:
            config[CONFIG_KEY] = ctx.tool_config
        try:
            policy = task_policy(config, CONFIG_KEY, task_id=ctx.task.id, base_dir=ctx.task.root)
        except LeakageConfigError as exc:
            raise ToolError(f"{exc} (fix the task's task.yaml)") from None
        ctx.state["literature.policy"] = policy
        return policy

    def _cache(self) -> SearchCache:
        ttl = self._cache_ttl_s if self._cache_ttl_s is not None else ttl_from_env()
        return SearchCache(self._cache_dir or default_cache_dir(), ttl)

    def start(self, ctx: ToolContext) -> None:
        """Check the task's leakage settings before the first action."""
        self.leakage_policy(ctx)

    # -- the call ------------------------------------------------------
    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = " ".join(str(args["query"]).split())
        limit = args.get("limit") or 10
        year_from, year_to = args.get("year_from"), args.get("year_to")
        if not query:
            raise ToolError("literature_search: the query is empty; usage: "
                            + self.schema.usage())
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"literature_search: limit must be between 1 and {MAX_LIMIT}, "
                            f"got {limit}")
        if year_from is not None and year_to is not None and year_from > year_to:
            raise ToolError(f"literature_search: year_from ({year_from}) is after year_to "
                            f"({year_to})")
        policy = self.leakage_policy(ctx)
        api_year_to = policy.year_to(year_to)
        base_url = (self._base_url or base_url_from_env()).rstrip("/")
        facts: dict[str, Any] = {"query": query, "limit": limit, "year_from": year_from,
                                 "year_to": year_to, "results": 0, "withheld": 0}
        if api_year_to != year_to:
            facts["api_year_to"] = api_year_to
        started = time.monotonic()
        try:
            if year_from is not None and api_year_to is not None and year_from > api_year_to:
                result, cache_state = SearchResult(total=0, papers=[]), "skipped"
            else:
                result, cache_state = self._search(base_url, query, limit, year_from, api_year_to)
        except (RequestFailed, ScholarResponseError) as exc:
            facts.update(outcome="error", error=str(exc), latency_s=round(time.monotonic() - started, 4),
                         attempts=getattr(exc, "attempts", 1))
            ctx.record(CONFIG_KEY, facts)
            return ToolResult(output=f"literature_search failed: {exc}", error=True,
                              info={"literature_error": str(exc)})
        shown: list[Any] = []
        reasons: Counter[str] = Counter()
        for paper in result.papers:
            reason = withhold_reason(policy, paper)
            if reason is None:
                shown.append(paper)
            else:
                reasons[reason] += 1
        withheld = sum(reasons.values())
        facts.update(outcome="ok", results=len(shown), withheld=withheld, total=result.total,
                     cache=cache_state, latency_s=round(time.monotonic() - started, 4),
                     requests=result.requests, attempts=result.attempts,
                     shown_ids=[p.paper_id for p in shown])
        if withheld:
            facts["withheld_reasons"] = dict(reasons)
        ctx.record(CONFIG_KEY, facts)
        text = render_results(query, shown, total=result.total, withheld=withheld,
                              year_from=year_from, year_to=year_to)
        if api_year_to != year_to and policy.cutoff_date is not None:
            text += (f"\n\n(This task only shows papers published before "
                     f"{policy.cutoff_date.isoformat()}.)")
        info: dict[str, Any] = {"results": len(shown)}
        if withheld:
            info["withheld"] = withheld
            info["withheld_note"] = withheld_note(withheld)
        return ToolResult(output=text, info=info)

    def _search(self, base_url: str, query: str, limit: int, year_from: int | None,
                year_to: int | None) -> tuple[SearchResult, str]:
        cache = self._cache()
        key = cache.key(base_url, query, limit, year_from, year_to)
        cached = cache.get(key)
        if cached is not None:
            return cached, "hit"
        api_key = self._api_key if self._api_key is not None else api_key_from_env()
        with SemanticScholarClient(base_url, api_key, policy=self.policy,
                                   page_size=self.page_size, sleep=self._sleep) as client:
            result = client.search(query, limit, year_from=year_from, year_to=year_to)
        cache.put(key, result)
        return result, "miss" if cache.enabled else "off"

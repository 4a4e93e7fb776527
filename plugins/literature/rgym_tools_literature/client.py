"""A small Semantic Scholar Graph API client: paper search with pagination.

``GET {base}/graph/v1/paper/search`` answers
``{"total": N, "offset": K, "next": K2, "data": [{"paperId": ..., ...}]}``;
``next`` is absent on the last page.  The base URL comes from
``RGYM_S2_BASE_URL`` and the optional key from ``S2_API_KEY`` or
``SEMANTIC_SCHOLAR_API_KEY`` (sent as ``x-api-key``, never logged or recorded).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from attrs import define, field

from rgym_core import RetryPolicy, call_with_retries, check_status

DEFAULT_BASE_URL = "https://api.semanticscholar.org"
SEARCH_PATH = "/graph/v1/paper/search"
FIELDS = ("title,authors,year,abstract,venue,citationCount,openAccessPdf,externalIds,"
          "publicationDate,url")
#: The API's largest page for paper search.
MAX_PAGE_SIZE = 100
SERVICE = "Semantic Scholar"


class ScholarResponseError(Exception):
    """The API answered something that is not a paper-search response."""


def base_url_from_env(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return (env.get("RGYM_S2_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def api_key_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get("S2_API_KEY") or env.get("SEMANTIC_SCHOLAR_API_KEY") or None


def _opt(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ScholarResponseError(f"{where}: field '{key}' has an unexpected type "
                                   f"({type(value).__name__})")
    return value


@define(frozen=True)
class Paper:
    """One search result, with the fields rgym asks for."""

    paper_id: str
    title: str
    authors: list[str] = field(factory=list)
    year: int | None = None
    abstract: str | None = None
    venue: str | None = None
    citation_count: int | None = None
    pdf_url: str | None = None
    external_ids: dict[str, str] = field(factory=dict)
    publication_date: str | None = None
    url: str | None = None

    @classmethod
    def from_api(cls, obj: Any, where: str = "paper") -> Paper:
        """Parse one element of the API's ``data`` list; raise
        :class:`ScholarResponseError` when it has the wrong shape."""
        if not isinstance(obj, dict):
            raise ScholarResponseError(f"{where}: expected an object, got {type(obj).__name__}")
        paper_id = obj.get("paperId")
        if not isinstance(paper_id, str) or not paper_id:
            raise ScholarResponseError(f"{where}: missing 'paperId'")
        authors = []
        for a in obj.get("authors") or []:
            name = a.get("name") if isinstance(a, dict) else None
            if isinstance(name, str) and name:
                authors.append(name)
        oa = obj.get("openAccessPdf")
        pdf_url = oa.get("url") if isinstance(oa, dict) else None
        ext = obj.get("externalIds")
        external_ids = ({str(k): str(v) for k, v in ext.items() if v is not None}
                        if isinstance(ext, dict) else {})
        return cls(
            paper_id=paper_id,
            title=_opt(obj, "title", str, where) or "(untitled)",
            authors=authors,
            year=_opt(obj, "year", int, where),
            abstract=_opt(obj, "abstract", str, where),
            venue=_opt(obj, "venue", str, where) or None,
            citation_count=_opt(obj, "citationCount", int, where),
            pdf_url=pdf_url if isinstance(pdf_url, str) and pdf_url else None,
            external_ids=external_ids,
            publication_date=_opt(obj, "publicationDate", str, where),
            url=_opt(obj, "url", str, where),
        )

    def to_api(self) -> dict[str, Any]:
        """The API's JSON form (what the cache stores)."""
        return {
            "paperId": self.paper_id, "title": self.title,
            "authors": [{"name": a} for a in self.authors], "year": self.year,
            "abstract": self.abstract, "venue": self.venue, "citationCount": self.citation_count,
            "openAccessPdf": {"url": self.pdf_url} if self.pdf_url else None,
            "externalIds": dict(self.external_ids), "publicationDate": self.publication_date,
            "url": self.url,
        }


@define
class SearchResult:
    """Papers found for one query, with how they were obtained."""

    total: int
    papers: list[Paper]
    requests: int = 0
    attempts: int = 0


def year_param(year_from: int | None, year_to: int | None) -> str | None:
    """The API's ``year`` filter: ``2019``, ``2016-2020``, ``2010-`` or ``-2015``."""
    if year_from is None and year_to is None:
        return None
    if year_from is not None and year_from == year_to:
        return str(year_from)
    return f"{year_from if year_from is not None else ''}-{year_to if year_to is not None else ''}"


class SemanticScholarClient:
    """Paper search over the Semantic Scholar Graph API.

    ``transport`` and ``sleep`` exist for tests; ``page_size`` caps each request.
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 policy: RetryPolicy | None = None, page_size: int = MAX_PAGE_SIZE,
                 sleep: Callable[[float], None] = time.sleep,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = (base_url or base_url_from_env()).rstrip("/")
        self.policy = policy or RetryPolicy()
        self.page_size = max(1, min(page_size, MAX_PAGE_SIZE))
        self._sleep = sleep
        headers = {"user-agent": "rgym-tools-literature/0.1"}
        if api_key:
            headers["x-api-key"] = api_key
        self.authenticated = bool(api_key)
        self._client = httpx.Client(base_url=self.base_url, headers=headers,
                                    timeout=self.policy.timeout, transport=transport)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SemanticScholarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _page(self, params: dict[str, Any]) -> dict[str, Any]:
        response = self._client.get(SEARCH_PATH, params=params)
        check_status(response, SERVICE)
        try:
            body = response.json()
        except ValueError:
            snippet = " ".join(response.text.split())[:120]
            raise ScholarResponseError(
                f"{SERVICE} returned malformed JSON (HTTP {response.status_code}, content-type "
                f"{response.headers.get('content-type', 'none')!r}): {snippet!r}") from None
        if not isinstance(body, dict) or not isinstance(body.get("data", []), list):
            raise ScholarResponseError(f"{SERVICE} returned an unexpected response: expected an "
                                       "object with a 'data' list")
        return body

    def search(self, query: str, limit: int = 10, *, year_from: int | None = None,
               year_to: int | None = None) -> SearchResult:
        """Up to ``limit`` papers for ``query``, following ``next`` across pages.

        Raises :class:`~rgym_core.http.RequestFailed` when the API
        cannot be reached and :class:`ScholarResponseError` for malformed answers.
        """
        papers: list[Paper] = []
        seen: set[str] = set()
        result = SearchResult(total=0, papers=papers)
        offset = 0
        while len(papers) < limit:
            params: dict[str, Any] = {"query": query, "fields": FIELDS, "offset": offset,
                                      "limit": min(self.page_size, limit - len(papers))}
            years = year_param(year_from, year_to)
            if years:
                params["year"] = years
            body, attempts = call_with_retries(functools.partial(self._page, params), self.policy,
                                               service=SERVICE, sleep=self._sleep)
            result.requests += 1
            result.attempts += attempts
            total = body.get("total")
            result.total = total if isinstance(total, int) and not isinstance(total, bool) else 0
            data = body.get("data") or []
            for i, obj in enumerate(data):
                paper = Paper.from_api(obj, where=f"result {offset + i + 1}")
                if paper.paper_id not in seen:
                    seen.add(paper.paper_id)
                    papers.append(paper)
            nxt = body.get("next")
            if not data or not isinstance(nxt, int) or isinstance(nxt, bool) or nxt <= offset:
                break
            offset = nxt
        del papers[limit:]
        result.total = max(result.total, len(papers))
        return result

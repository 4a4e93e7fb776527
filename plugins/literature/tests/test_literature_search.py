"""literature_search against a real loopback HTTP server speaking Semantic Scholar's format."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest
from lit_helpers import make_ctx
from rgym_tools_literature.cache import SearchCache
from rgym_tools_literature.client import SEARCH_PATH, SearchResult, SemanticScholarClient
from rgym_tools_literature.testing import (
    LoopbackServer,
    Reply,
    make_paper,
    scholar_search_handler,
)
from rgym_tools_literature.tool import LiteratureSearchTool

from rgym_core.http import RetryPolicy
from rgym_core.tools import ToolError

LONG_ABSTRACT = "Diffusion transformers scale well. " * 40
PAPERS = [
    make_paper("p1", "Scalable Diffusion Transformers", year=2022, abstract=LONG_ABSTRACT,
               authors=["William Peebles", "Saining Xie", "Third Author", "Fourth Author"],
               venue="ICCV", citations=1500, pdf_url="https://arxiv.org/pdf/2212.09748",
               arxiv="2212.09748", publication_date="2022-12-19"),
    make_paper("p2", "Denoising Diffusion Probabilistic Models", year=2020, citations=9000,
               arxiv="2006.11239", publication_date="2020-06-19"),
    make_paper("p3", "Diffusion Models Beat GANs", year=2021, doi="10.5555/ABC.123",
               publication_date="2021-05-11"),
    make_paper("p4", "Latent Diffusion Models", year=2022, publication_date="2022-04-13"),
    make_paper("p5", "Consistency Models for Diffusion", year=2023,
               publication_date="2023-03-02"),
    make_paper("p6", "Diffusion Forcing", year=2024, publication_date="2024-07-01"),
    make_paper("p7", "Flow Matching for Diffusion", year=2024, publication_date=None),
]

FAST = RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05,
                   timeout=httpx.Timeout(2.0))


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        srv.handle(SEARCH_PATH, scholar_search_handler(PAPERS))
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_tool(server: LoopbackServer, tmp_path: Path, sleeps: list[float] | None = None,
              **kwargs) -> LiteratureSearchTool:
    import time as _time

    def sleep(s: float) -> None:
        if sleeps is not None:
            sleeps.append(s)
        _time.sleep(s)

    kwargs.setdefault("policy", FAST)
    return LiteratureSearchTool(base_url=server.url, api_key=kwargs.pop("api_key", ""),
                                cache_dir=tmp_path / "cache", sleep=sleep, **kwargs)


def run(tool, ctx, **args):
    return tool.call(tool.schema.bind(args), ctx)


def test_normal_results_are_rendered_compactly(server, tmp_path):
    tool = make_tool(server, tmp_path)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion transformers", limit=5)
    assert not result.error
    text = result.output
    assert "1. Scalable Diffusion Transformers (2022; ICCV; 1500 citations)" in text
    assert "Authors: William Peebles, Saining Xie, Third Author and 1 more" in text
    assert "PDF: https://arxiv.org/pdf/2212.09748" in text
    assert "arXiv 2212.09748" in text
    abstract_line = next(line for line in text.splitlines() if "Abstract:" in line)
    assert abstract_line.endswith("...") and len(abstract_line) < 330
    assert "withheld" not in text
    (req,) = server.hits(SEARCH_PATH)
    assert req.query["query"] == "diffusion transformers"
    assert set(req.query["fields"].split(",")) >= {"title", "authors", "year", "abstract", "venue",
                                                   "citationCount", "openAccessPdf", "externalIds"}
    assert "x-api-key" not in req.headers
    ((key, facts),) = recorded
    assert key == "literature"
    assert facts["outcome"] == "ok" and facts["results"] == 1 and facts["withheld"] == 0
    assert facts["cache"] == "miss" and facts["requests"] == 1 and facts["latency_s"] >= 0


def test_pagination_follows_next(server, tmp_path):
    tool = make_tool(server, tmp_path, page_size=2)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion", limit=5)
    hits = server.hits(SEARCH_PATH)
    assert [(r.query["offset"], r.query["limit"]) for r in hits] == [("0", "2"), ("2", "2"),
                                                                     ("4", "1")]
    assert [line.split(". ", 1)[0] for line in result.output.splitlines()
            if line[:1].isdigit()] == ["1", "2", "3", "4", "5"]
    assert "7 papers match; showing 5" in result.output
    assert recorded[0][1]["requests"] == 3


def test_pagination_stops_on_the_last_page(server, tmp_path):
    tool = make_tool(server, tmp_path, page_size=2)
    ctx, _ = make_ctx(tmp_path)
    result = run(tool, ctx, query="models", limit=10)
    assert len(server.hits(SEARCH_PATH)) == 2
    assert "showing 4" in result.output


def test_year_range_is_sent_to_the_api(server, tmp_path):
    tool = make_tool(server, tmp_path)
    ctx, _ = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion", year_from=2021, year_to=2022)
    assert server.hits(SEARCH_PATH)[0].query["year"] == "2021-2022"
    assert "years 2021-2022" in result.output
    assert "Diffusion Forcing" not in result.output and "Latent Diffusion" in result.output


def test_429_retry_after_is_honoured(server, tmp_path, sleeps):
    server.queue(SEARCH_PATH, Reply(429, {"message": "Too Many Requests"},
                                    headers={"Retry-After": "1"}))
    tool = make_tool(server, tmp_path, sleeps)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert not result.error
    first, second = server.hits(SEARCH_PATH)
    assert sleeps == [1.0]
    assert second.at - first.at >= 1.0
    assert recorded[0][1]["attempts"] == 2


def test_429_with_too_long_retry_after_fails_at_once(server, tmp_path, sleeps):
    server.queue(SEARCH_PATH, Reply(429, {"message": "slow down"}, headers={"Retry-After": "3600"}))
    tool = make_tool(server, tmp_path, sleeps)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error and "asks to wait 3600 s" in result.output
    assert sleeps == [] and len(server.hits(SEARCH_PATH)) == 1
    assert recorded[0][1]["outcome"] == "error"


def test_500_then_success(server, tmp_path, sleeps):
    server.queue(SEARCH_PATH, Reply(500, {"message": "Internal Server Error"}))
    tool = make_tool(server, tmp_path, sleeps)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert not result.error and "Scalable Diffusion Transformers" in result.output
    assert len(server.hits(SEARCH_PATH)) == 2 and len(sleeps) == 1
    assert 0 <= sleeps[0] <= FAST.backoff_max_s
    assert recorded[0][1]["attempts"] == 2


def test_persistent_500_gives_a_clear_error_after_the_cap(server, tmp_path):
    server.handle(SEARCH_PATH, Reply(503, {"message": "upstream down"}))
    tool = make_tool(server, tmp_path)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error
    assert "Semantic Scholar failed (HTTP 503: upstream down) after 3 attempts" in result.output
    assert len(server.hits(SEARCH_PATH)) == 3
    assert recorded[0][1]["attempts"] == 3


def test_400_is_not_retried(server, tmp_path):
    server.queue(SEARCH_PATH, Reply(400, {"error": "Unrecognized or unsupported fields: [x]"}))
    tool = make_tool(server, tmp_path)
    ctx, _ = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error and "HTTP 400" in result.output and "unsupported fields" in result.output
    assert len(server.hits(SEARCH_PATH)) == 1


def test_slow_response_past_the_timeout(server, tmp_path):
    server.handle(SEARCH_PATH, Reply(200, {"total": 0, "offset": 0, "data": []}, delay_s=2.0))
    policy = RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.02,
                         timeout=httpx.Timeout(5.0, read=0.3))
    tool = make_tool(server, tmp_path, policy=policy)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error
    assert "timed out waiting for data (limit 0.3 s) after 2 attempts" in result.output
    assert len(server.hits(SEARCH_PATH)) == 2
    assert recorded[0][1]["outcome"] == "error"


def test_connection_refused_is_retried_then_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tool = LiteratureSearchTool(base_url=f"http://127.0.0.1:{port}", api_key="",
                                cache_dir=tmp_path, policy=FAST, sleep=lambda s: None)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error and "connection failed" in result.output and "after 3 attempts" in result.output


def test_malformed_json_is_an_error_observation_and_not_cached(server, tmp_path):
    server.queue(SEARCH_PATH, Reply(200, '{"total": 3, "data": [', content_type="application/json"))
    tool = make_tool(server, tmp_path)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error and "malformed JSON" in result.output
    assert recorded[0][1]["outcome"] == "error"
    again = run(tool, ctx, query="diffusion")
    assert not again.error and len(server.hits(SEARCH_PATH)) == 2


def test_wrong_shape_is_an_error_observation(server, tmp_path):
    server.queue(SEARCH_PATH, Reply(200, {"total": 1, "data": [{"title": "no id"}]}))
    tool = make_tool(server, tmp_path)
    ctx, _ = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert result.error and "missing 'paperId'" in result.output


def test_cache_hit_does_not_call_the_server(server, tmp_path):
    tool = make_tool(server, tmp_path)
    ctx, recorded = make_ctx(tmp_path)
    first = run(tool, ctx, query="Diffusion  Models", limit=3)
    second = run(tool, ctx, query="diffusion models", limit=3)
    assert len(server.hits(SEARCH_PATH)) == 1
    assert [f["cache"] for _, f in recorded] == ["miss", "hit"]
    assert first.output.split("\n", 1)[1] == second.output.split("\n", 1)[1]
    run(tool, ctx, query="diffusion models", limit=4)
    assert len(server.hits(SEARCH_PATH)) == 2


def test_cache_expires_and_survives_corruption(tmp_path):
    cache = SearchCache(tmp_path, ttl_s=60)
    key = cache.key("http://x", "q", 10, None, None)
    cache.put(key, SearchResult(total=1, papers=[]), now=1000.0)
    assert cache.get(key, now=1059.0) is not None
    assert cache.get(key, now=1061.0) is None
    (tmp_path / f"{key}.json").write_text("{not json")
    assert cache.get(key) is None and not (tmp_path / f"{key}.json").exists()
    assert SearchCache(tmp_path, ttl_s=0).get(key) is None


def test_api_key_is_sent_but_never_recorded(server, tmp_path, monkeypatch):
    monkeypatch.setenv("S2_API_KEY", "secret-key-123")
    tool = LiteratureSearchTool(base_url=server.url, cache_dir=tmp_path, policy=FAST)
    ctx, recorded = make_ctx(tmp_path)
    result = run(tool, ctx, query="diffusion")
    assert server.hits(SEARCH_PATH)[0].headers["x-api-key"] == "secret-key-123"
    assert "secret-key-123" not in json.dumps(recorded) + result.output + json.dumps(result.info)


def test_base_url_comes_from_the_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RGYM_S2_BASE_URL", server.url + "/")
    monkeypatch.setenv("RGYM_CACHE_DIR", str(tmp_path / "rc"))
    monkeypatch.delenv("S2_API_KEY", raising=False)
    monkeypatch.delenv("SEMANTIC_SCHOLAR_API_KEY", raising=False)
    tool = LiteratureSearchTool(policy=FAST)
    ctx, _ = make_ctx(tmp_path)
    assert not run(tool, ctx, query="diffusion").error
    assert len(server.hits(SEARCH_PATH)) == 1
    assert list((tmp_path / "rc" / "literature").glob("*.json"))


def test_bad_arguments_are_tool_errors(server, tmp_path):
    tool = make_tool(server, tmp_path)
    ctx, _ = make_ctx(tmp_path)
    with pytest.raises(ToolError, match="limit must be between 1 and 100"):
        run(tool, ctx, query="x", limit=500)
    with pytest.raises(ToolError, match="year_from .2024. is after year_to .2020."):
        run(tool, ctx, query="x", year_from=2024, year_to=2020)
    with pytest.raises(ToolError, match="query is empty"):
        run(tool, ctx, query="   ")
    assert server.hits(SEARCH_PATH) == []


def test_client_can_be_used_alone(server):
    with SemanticScholarClient(server.url, policy=FAST, page_size=3) as client:
        result = client.search("diffusion", 4, year_from=2022)
    assert [p.paper_id for p in result.papers] == ["p1", "p4", "p5", "p6"]
    assert result.requests == 2 and result.total == 5

"""Leakage control: blocked papers, URL patterns and the cutoff date are withheld and counted."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from lit_helpers import make_ctx
from rgym_tools_literature.client import SEARCH_PATH, Paper
from rgym_tools_literature.leakage import LeakagePolicy, normalise_id
from rgym_tools_literature.testing import LoopbackServer, make_paper, scholar_search_handler
from rgym_tools_literature.tool import LiteratureSearchTool

from rgym_core.http import RetryPolicy
from rgym_core.tools import ToolError

SOURCE = make_paper("src-paper-id", "SD-LoRA: Scalable Decoupled Low-Rank Adaptation", year=2025,
                    arxiv="2501.13198", publication_date="2025-01-22",
                    pdf_url="https://arxiv.org/pdf/2501.13198",
                    abstract="Low-rank adaptation for class incremental learning.")
OTHERS = [
    make_paper("lora", "LoRA: Low-Rank Adaptation of Large Language Models", year=2021,
               arxiv="2106.09685", publication_date="2021-06-17",
               abstract="Low-rank adaptation for large language models."),
    make_paper("inclora", "InfLoRA: Interference-Free Low-Rank Adaptation", year=2024,
               doi="10.1109/CVPR.2024.0001", publication_date="2024-03-01",
               abstract="Low-rank adaptation for continual learning."),
    make_paper("undated", "Undated Low-Rank Adaptation Notes", year=None,
               abstract="Low-rank adaptation notes."),
    make_paper("repo", "A Low-Rank Adaptation Toolkit", year=2022, publication_date="2022-02-02",
               pdf_url="https://github.com/someone/lora-toolkit/paper.pdf"),
]
FAST = RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.02,
                   timeout=httpx.Timeout(2.0))


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        srv.handle(SEARCH_PATH, scholar_search_handler([SOURCE, *OTHERS]))
        yield srv


def search(server, tmp_path, config, **args):
    tool = LiteratureSearchTool(base_url=server.url, api_key="", cache_dir=tmp_path / "c",
                                policy=FAST)
    ctx, recorded = make_ctx(tmp_path, config)
    tool.start(ctx)
    result = tool.call(tool.schema.bind({"query": "low-rank adaptation", **args}), ctx)
    return result, recorded[-1][1]


@pytest.mark.parametrize("entry", ["arXiv:2501.13198", "2501.13198v2", "src-paper-id",
                                   "https://arxiv.org/abs/2501.13198",
                                   "SD-LoRA: scalable decoupled low-rank adaptation"])
def test_blocked_source_paper_is_withheld_and_counted(server, tmp_path, entry):
    result, facts = search(server, tmp_path, {"blocked_papers": [entry]})
    assert "SD-LoRA" not in result.output and "2501.13198" not in result.output
    assert "1 result withheld by the task's leakage policy" in result.output
    assert "LoRA: Low-Rank Adaptation of Large Language Models" in result.output
    assert facts["withheld"] == 1 and facts["withheld_reasons"] == {"blocked_paper": 1}
    assert "src-paper-id" not in facts["shown_ids"]
    assert result.info["withheld"] == 1


def test_blocked_doi_is_case_insensitive(server, tmp_path):
    result, facts = search(server, tmp_path, {"blocked_papers": ["doi:10.1109/cvpr.2024.0001"]})
    assert "InfLoRA" not in result.output and facts["withheld"] == 1


def test_blocked_url_patterns(server, tmp_path):
    config = {"blocked_url_patterns": ["arxiv.org/abs/2501.13198*", "github.com/someone/lora-toolkit"]}
    result, facts = search(server, tmp_path, config)
    assert "SD-LoRA" not in result.output and "Toolkit" not in result.output
    assert facts["withheld"] == 2 and facts["withheld_reasons"] == {"blocked_url": 2}
    assert "2 results withheld" in result.output


def test_cutoff_date_withholds_later_papers_and_narrows_the_request(server, tmp_path):
    result, facts = search(server, tmp_path, {"cutoff_date": dt.date(2024, 1, 1)})
    assert server.hits(SEARCH_PATH)[0].query["year"] == "-2023"
    assert "SD-LoRA" not in result.output and "InfLoRA" not in result.output
    assert "LoRA: Low-Rank Adaptation" in result.output
    assert "only shows papers published before 2024-01-01" in result.output
    assert facts["api_year_to"] == 2023


def test_mid_year_cutoff_uses_publication_dates(server, tmp_path):
    papers = [make_paper("a", "Early adaptation", year=2024, publication_date="2024-02-01"),
              make_paper("b", "Late adaptation", year=2024, publication_date="2024-09-01"),
              make_paper("c", "Dateless adaptation", year=2024)]
    server.handle(SEARCH_PATH, scholar_search_handler(papers))
    tool = LiteratureSearchTool(base_url=server.url, api_key="", cache_dir=tmp_path, policy=FAST)
    ctx, recorded = make_ctx(tmp_path, {"cutoff_date": "2024-06-01"})
    result = tool.call(tool.schema.bind({"query": "adaptation"}), ctx)
    assert server.hits(SEARCH_PATH)[0].query["year"] == "-2024"
    assert "Early adaptation" in result.output
    assert "Late adaptation" not in result.output and "Dateless adaptation" not in result.output
    assert recorded[0][1]["withheld_reasons"] == {"after_cutoff": 2}


def test_withhold_undated(server, tmp_path):
    result, facts = search(server, tmp_path, {"withhold_undated": True})
    assert "Undated" not in result.output and facts["withheld_reasons"] == {"undated": 1}


def test_policy_applies_to_cached_results(server, tmp_path):
    open_result, _ = search(server, tmp_path, {})
    assert "SD-LoRA" in open_result.output
    blocked, facts = search(server, tmp_path, {"blocked_papers": ["2501.13198"]})
    assert facts["cache"] == "hit" and "SD-LoRA" not in blocked.output
    assert len(server.hits(SEARCH_PATH)) == 1


def test_year_range_entirely_after_the_cutoff_makes_no_request(server, tmp_path):
    result, facts = search(server, tmp_path, {"cutoff_date": "2023-01-01"}, year_from=2024)
    assert server.hits(SEARCH_PATH) == [] and facts["cache"] == "skipped"
    assert "none to show" in result.output


@pytest.mark.parametrize(("config", "message"), [
    ({"blocked_paper": ["x"]}, r"unknown key\(s\) 'blocked_paper'"),
    ({"cutoff_date": "next year"}, r"cutoff_date: expected a date like 2024-01-01"),
    ({"blocked_papers": {"a": 1}}, r"blocked_papers: expected a list of strings"),
    ({"withhold_undated": "yes"}, r"withhold_undated: expected true or false"),
])
def test_bad_task_config_names_the_key(tmp_path, config, message):
    tool = LiteratureSearchTool(base_url="http://127.0.0.1:9", cache_dir=tmp_path)
    ctx, _ = make_ctx(tmp_path, config)
    with pytest.raises(ToolError, match=message) as info:
        tool.start(ctx)
    assert "test/lit-task: tool_config.literature" in str(info.value)


def test_normalise_id_and_url_blocking():
    assert normalise_id("arXiv:2501.13198v3") == "2501.13198"
    assert normalise_id("https://arxiv.org/pdf/2501.13198v1.pdf") == "2501.13198"
    assert normalise_id("10.48550/arXiv.2501.13198") == "2501.13198"
    assert normalise_id("https://doi.org/10.1109/CVPR.1") == "10.1109/cvpr.1"
    policy = LeakagePolicy.from_config({"blocked_papers": ["2501.13198", "10.1109/CVPR.1"],
                                        "blocked_url_patterns": ["*SD-LoRA*"]})
    assert policy.url_blocked("https://arxiv.org/pdf/2501.13198v2")
    assert policy.url_blocked("http://export.arxiv.org/abs/2501.13198")
    assert policy.url_blocked("https://doi.org/10.1109/cvpr.1")
    assert policy.url_blocked("https://github.com/x/SD-LoRA-CL")
    assert not policy.url_blocked("https://arxiv.org/pdf/2501.13199")
    assert not LeakagePolicy().active and policy.active


def test_paper_round_trips_through_the_cache_form():
    paper = Paper.from_api(SOURCE)
    assert Paper.from_api(paper.to_api()) == paper

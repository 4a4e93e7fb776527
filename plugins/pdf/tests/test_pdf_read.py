"""read_pdf against real PDFs served by a loopback HTTP server, and from the workspace."""

from __future__ import annotations

import io
import re
import shlex

import httpx
import pypdf
import pytest
from pdf_helpers import make_ctx
from rgym_tools_pdf.pages import format_pages, parse_pages
from rgym_tools_pdf.testing import make_pdf
from rgym_tools_pdf.tool import ReadPdfTool

from rgym_core.http import RetryPolicy
from rgym_core.testing import LoopbackServer, Reply
from rgym_core.tools import ToolError

PAGES = [f"Page {i} of the test paper.\n" + f"Sentence number {i} about attention. " * 12
         for i in range(1, 11)]
PDF = make_pdf(PAGES)
FAST = RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.02,
                   timeout=httpx.Timeout(2.0))


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        srv.handle("/paper.pdf", Reply(200, PDF, content_type="application/pdf"))
        yield srv


def tool(**kwargs) -> ReadPdfTool:
    kwargs.setdefault("policy", FAST)
    kwargs.setdefault("allow_private_hosts", True)
    return ReadPdfTool(sleep=lambda s: None, **kwargs)


def call(t: ReadPdfTool, ctx, **args):
    return t.call(t.schema.bind(args), ctx)


def test_reads_a_pdf_url(server, tmp_path):
    ctx, recorded = make_ctx(tmp_path)
    result = call(tool(), ctx, source=server.url + "/paper.pdf", pages="2-3")
    assert not result.error
    assert result.output.startswith(f"PDF {server.url}/paper.pdf: 10 pages; pages 2-3 requested.")
    assert "--- page 2 of 10 ---\nPage 2 of the test paper." in result.output
    assert "Page 3 of the test paper." in result.output and "Page 4 of" not in result.output
    ((key, facts),) = recorded
    assert key == "pdf" and facts["outcome"] == "ok" and facts["pages_shown"] == "2-3"
    assert facts["bytes"] == len(PDF) and facts["cache"] == "miss" and facts["attempts"] == 1
    assert facts["truncated"] is False and facts["content_type"] == "application/pdf"


def test_octet_stream_with_pdf_signature_is_accepted(server, tmp_path):
    server.handle("/blob", Reply(200, PDF, content_type="application/octet-stream"))
    ctx, _ = make_ctx(tmp_path)
    result = call(tool(), ctx, source=server.url + "/blob", pages="1")
    assert not result.error and "Page 1 of the test paper." in result.output


def test_html_is_refused_with_a_hint(server, tmp_path):
    server.handle("/landing", Reply(200, "<html>Sign in</html>", content_type="text/html"))
    ctx, recorded = make_ctx(tmp_path)
    result = call(tool(), ctx, source=server.url + "/landing")
    assert result.error and "is text/html, not a PDF" in result.output
    assert "arxiv.org/pdf/<id>" in result.output
    assert recorded[0][1]["outcome"] == "error"


def test_server_that_lies_about_the_type_is_caught(server, tmp_path):
    server.handle("/fake.pdf", Reply(200, b"<html>not really</html>",
                                     content_type="application/pdf"))
    ctx, _ = make_ctx(tmp_path)
    result = call(tool(), ctx, source=server.url + "/fake.pdf")
    assert result.error and "does not start with %PDF" in result.output


def test_oversized_with_content_length_is_not_downloaded(server, tmp_path):
    ctx, _ = make_ctx(tmp_path, {"max_bytes": 2000})
    result = call(tool(), ctx, source=server.url + "/paper.pdf")
    assert result.error and "over the 0.0 MB download limit; not downloaded" in result.output


def test_oversized_stream_is_aborted(server, tmp_path):
    big = make_pdf(["x" * 1000] * 200)
    server.handle("/big.pdf", Reply(200, big, content_type="application/pdf", omit_length=True))
    ctx, _ = make_ctx(tmp_path, {"max_bytes": 100_000})
    assert len(big) > 100_000
    result = call(tool(), ctx, source=server.url + "/big.pdf")
    assert result.error and "larger than the 0.1 MB download limit; download aborted" in result.output


def test_500_then_success_and_404_without_retry(server, tmp_path):
    server.queue("/paper.pdf", Reply(502, "bad gateway"))
    ctx, recorded = make_ctx(tmp_path)
    assert not call(tool(), ctx, source=server.url + "/paper.pdf", pages="1").error
    assert len(server.hits("/paper.pdf")) == 2 and recorded[0][1]["attempts"] == 2
    result = call(tool(), ctx, source=server.url + "/missing.pdf")
    assert result.error and "HTTP 404" in result.output
    assert len(server.hits("/missing.pdf")) == 1


def test_slow_server_times_out(server, tmp_path):
    server.handle("/slow.pdf", Reply(200, PDF, content_type="application/pdf", delay_s=2.0))
    policy = RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.02,
                         timeout=httpx.Timeout(5.0, read=0.3))
    ctx, recorded = make_ctx(tmp_path)
    result = call(tool(policy=policy), ctx, source=server.url + "/slow.pdf")
    assert result.error and "timed out waiting for data (limit 0.3 s) after 2 attempts" in result.output
    assert recorded[0][1]["attempts"] == 2


def test_long_output_is_truncated_with_a_marker_that_reads_the_rest(server, tmp_path):
    ctx, recorded = make_ctx(tmp_path, {"max_chars": 1600})
    t = tool()
    source = server.url + "/paper.pdf"
    seen: list[int] = []
    args = {"source": source}
    for _ in range(20):
        result = call(t, ctx, **args)
        assert not result.error and len(result.output) <= 1600 + 300
        seen += [int(n) for n in re.findall(r"--- page (\d+) of 10 ---", result.output)]
        marker = re.search(r"Read them with: (read_pdf .+)\]$", result.output)
        if marker is None:
            break
        name, src, pages = shlex.split(marker.group(1))
        assert name == "read_pdf" and src == source
        args = {"source": src, "pages": pages}
    assert seen == list(range(1, 11))
    assert recorded[0][1]["truncated"] is True and recorded[-1][1]["truncated"] is False
    assert len(server.hits("/paper.pdf")) == 1
    assert [f["cache"] for _, f in recorded][1:] == ["hit"] * (len(recorded) - 1)


def test_a_page_longer_than_the_limit_is_cut(server, tmp_path):
    ctx, _ = make_ctx(tmp_path, {"max_chars": 300})
    result = call(tool(), ctx, source=server.url + "/paper.pdf", pages="1-2")
    assert "[page 1 is longer than the 300-character output limit" in result.output
    assert "Read the following pages with: read_pdf" in result.output
    assert result.output.rstrip().endswith(" 2]")


@pytest.mark.parametrize(("pages", "message"), [
    ("11", r"'11' is out of range: the PDF has 10 pages \(1-10\)"),
    ("3-x", r"cannot read page range '3-x'"),
    ("5-2", r"empty or backwards"),
])
def test_bad_page_ranges_are_clear_errors(server, tmp_path, pages, message):
    ctx, recorded = make_ctx(tmp_path)
    result = call(tool(), ctx, source=server.url + "/paper.pdf", pages=pages)
    assert result.error and re.search(message, result.output)
    assert recorded[0][1]["pages_total"] == 10


def test_page_spec_helpers():
    assert parse_pages("1-3,5", 10) == [1, 2, 3, 5]
    assert parse_pages(" 8- ", 10) == [8, 9, 10]
    assert parse_pages("all", 3) == [1, 2, 3] and parse_pages(None, 2) == [1, 2]
    assert parse_pages("2,2,1", 3) == [2, 1]
    assert format_pages([4, 5, 6, 9, 11, 12]) == "4-6,9,11-12"
    with pytest.raises(ToolError):
        parse_pages("0", 3)


def test_encrypted_and_damaged_pdfs(server, tmp_path):
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(PDF)))
    writer.encrypt(user_password="secret", algorithm="AES-128")
    buf = io.BytesIO()
    writer.write(buf)
    server.handle("/locked.pdf", Reply(200, buf.getvalue(), content_type="application/pdf"))
    server.handle("/broken.pdf", Reply(200, b"%PDF-1.4\n garbage " * 50,
                                       content_type="application/pdf"))
    ctx, _ = make_ctx(tmp_path)
    locked = call(tool(), ctx, source=server.url + "/locked.pdf")
    assert locked.error and "encrypted (password protected)" in locked.output
    broken = call(tool(), ctx, source=server.url + "/broken.pdf")
    assert broken.error and "could not be parsed as a PDF" in broken.output


def test_reads_a_workspace_path(tmp_path):
    ctx, recorded = make_ctx(tmp_path)
    ctx.sandbox.write_file("papers/mine.pdf", make_pdf(["Workspace page one", "Second"]))
    ctx.sandbox.write_file("notes.txt", "plain text")
    result = call(tool(), ctx, source="papers/mine.pdf")
    assert not result.error and "Workspace page one" in result.output and "Second" in result.output
    assert recorded[0][1]["kind"] == "workspace"
    missing = call(tool(), ctx, source="papers/none.pdf")
    assert missing.error and "no such file in the workspace: papers/none.pdf" in missing.output
    text = call(tool(), ctx, source="notes.txt")
    assert text.error and "notes.txt is not a PDF" in text.output
    with pytest.raises(ToolError, match="give an http\\(s\\) URL or a workspace path"):
        call(tool(), ctx, source="file:///etc/passwd")


def test_private_hosts_are_refused_by_default(server, tmp_path, monkeypatch):
    monkeypatch.delenv("RGYM_PDF_ALLOW_PRIVATE_HOSTS", raising=False)
    ctx, recorded = make_ctx(tmp_path)
    result = call(ReadPdfTool(policy=FAST), ctx, source=server.url + "/paper.pdf")
    assert result.error and "private or loopback address (127.0.0.1)" in result.output
    assert server.requests == []
    monkeypatch.setenv("RGYM_PDF_ALLOW_PRIVATE_HOSTS", "1")
    ctx2, _ = make_ctx(tmp_path)
    assert not call(ReadPdfTool(policy=FAST), ctx2, source=server.url + "/paper.pdf",
                    pages="1").error


def test_blocked_papers_and_redirects_to_them_are_refused(server, tmp_path):
    server.handle("/source-paper.pdf", Reply(200, PDF, content_type="application/pdf"))
    server.handle("/redirect", Reply(302, b"", headers={"Location": "/source-paper.pdf"}))
    task_config = {"literature": {"blocked_papers": ["arXiv:2501.13198"],
                                  "blocked_url_patterns": ["*/source-paper.pdf"]}}
    ctx, recorded = make_ctx(tmp_path, task_tool_config=task_config)
    direct = call(tool(), ctx, source="https://arxiv.org/pdf/2501.13198v1")
    assert direct.error and "blocked by the task's leakage policy" in direct.output
    redirected = call(tool(), ctx, source=server.url + "/redirect")
    assert redirected.error and "blocked by the task's leakage policy" in redirected.output
    assert len(server.hits("/redirect")) == 1 and server.hits("/source-paper.pdf") == []
    assert [f.get("withheld") for _, f in recorded] == [1, 1]


def test_bad_config_is_reported_at_start(tmp_path):
    ctx, _ = make_ctx(tmp_path, {"max_chars": -5})
    with pytest.raises(ToolError, match=r"test/pdf-task: tool_config.pdf.max_chars: expected a "
                                        r"positive integer"):
        tool().start(ctx)
    ctx, _ = make_ctx(tmp_path, {"max_char": 5})
    with pytest.raises(ToolError, match=r"unknown key\(s\) 'max_char'"):
        tool().start(ctx)

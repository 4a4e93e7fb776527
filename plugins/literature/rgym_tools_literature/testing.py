"""Test helpers: Semantic Scholar answers and generated papers and PDFs.

The HTTP server is rgym's one loopback test server,
:class:`rgym_core.testing.LoopbackServer` (re-exported here with its
:class:`Reply` and :class:`RecordedRequest`).  :func:`scholar_search_handler`
answers like Semantic Scholar's paper search (``total``/``offset``/``next``/
``data``).  No dependency beyond the standard library and rgym-core.
"""

from __future__ import annotations

from typing import Any

from rgym_core.testing.http import Handler, LoopbackServer, RecordedRequest, Reply

__all__ = ["Handler", "LoopbackServer", "RecordedRequest", "Reply", "make_paper",
           "scholar_search_handler"]



def make_paper(paper_id: str, title: str, *, year: int | None = 2020,
               abstract: str | None = None, authors: list[str] | None = None,
               venue: str = "NeurIPS", citations: int = 10, pdf_url: str | None = None,
               arxiv: str | None = None, doi: str | None = None,
               publication_date: str | None = None) -> dict[str, Any]:
    """One paper in the Graph API's JSON form."""
    ext: dict[str, Any] = {"CorpusId": abs(hash(paper_id)) % 10**8}
    if arxiv:
        ext["ArXiv"] = arxiv
    if doi:
        ext["DOI"] = doi
    return {
        "paperId": paper_id, "title": title, "year": year, "venue": venue,
        "abstract": abstract if abstract is not None else f"We study {title.lower()}.",
        "authors": [{"authorId": str(i), "name": n}
                    for i, n in enumerate(authors or ["Ada Lovelace", "Alan Turing"])],
        "citationCount": citations,
        "openAccessPdf": {"url": pdf_url, "status": "GREEN"} if pdf_url else None,
        "externalIds": ext, "publicationDate": publication_date,
        "url": f"https://www.semanticscholar.org/paper/{paper_id}",
    }


def scholar_search_handler(papers: list[dict[str, Any]]) -> Handler:
    """A handler for ``/graph/v1/paper/search`` over ``papers``: every query word must
    appear in the title or abstract; honours ``offset``, ``limit`` (1-100) and ``year``."""

    def in_years(paper: dict[str, Any], years: str) -> bool:
        year = paper.get("year")
        if not years:
            return True
        if year is None:
            return False
        lo, _, hi = years.partition("-") if "-" in years else (years, "", years)
        return (not lo or year >= int(lo)) and (not hi or year <= int(hi))

    def handler(req: RecordedRequest) -> Reply:
        query = req.query.get("query", "").lower().split()
        try:
            offset = int(req.query.get("offset", "0"))
            limit = int(req.query.get("limit", "100"))
        except ValueError:
            return Reply(400, {"error": "offset and limit must be integers"})
        if not 1 <= limit <= 100:
            return Reply(400, {"error": "Requested limit is outside the range [1, 100]"})
        matches = [p for p in papers
                   if all(w in (p["title"] + " " + (p.get("abstract") or "")).lower() for w in query)
                   and in_years(p, req.query.get("year", ""))]
        page = matches[offset:offset + limit]
        body: dict[str, Any] = {"total": len(matches), "offset": offset, "data": page}
        if offset + limit < len(matches):
            body["next"] = offset + limit
        return Reply(200, body)

    return handler

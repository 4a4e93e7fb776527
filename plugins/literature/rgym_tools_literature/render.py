"""Compact text rendering of search results for an agent."""

from __future__ import annotations

from rgym_tools_literature.client import Paper

ABSTRACT_CHARS = 300
AUTHORS_SHOWN = 3


def trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def render_paper(index: int, paper: Paper, *, abstract_chars: int = ABSTRACT_CHARS) -> str:
    facts = [str(paper.year) if paper.year else "n.d."]
    if paper.venue:
        facts.append(paper.venue)
    if paper.citation_count is not None:
        facts.append(f"{paper.citation_count} citations")
    lines = [f"{index}. {paper.title} ({'; '.join(facts)})"]
    if paper.authors:
        shown = ", ".join(paper.authors[:AUTHORS_SHOWN])
        more = len(paper.authors) - AUTHORS_SHOWN
        lines.append(f"   Authors: {shown}" + (f" and {more} more" if more > 0 else ""))
    ids = [f"S2 {paper.paper_id}"]
    if paper.external_ids.get("ArXiv"):
        ids.append(f"arXiv {paper.external_ids['ArXiv']}")
    if paper.external_ids.get("DOI"):
        ids.append(f"DOI {paper.external_ids['DOI']}")
    lines.append(f"   IDs: {', '.join(ids)}")
    if paper.pdf_url:
        lines.append(f"   PDF: {paper.pdf_url}")
    if paper.abstract:
        lines.append(f"   Abstract: {trim(paper.abstract, abstract_chars)}")
    return "\n".join(lines)


def withheld_note(withheld: int) -> str:
    return (f"{withheld} result{'s' if withheld != 1 else ''} withheld by the task's "
            "leakage policy")


def render_results(query: str, papers: list[Paper], *, total: int, withheld: int,
                   year_from: int | None = None, year_to: int | None = None) -> str:
    """A numbered list with title, year, venue, citations, first authors, ids, PDF
    link and trimmed abstract; a header line says how many were found and withheld."""
    years = ""
    if year_from is not None or year_to is not None:
        years = f", years {year_from if year_from is not None else '...'}-" \
                f"{year_to if year_to is not None else '...'}"
    header = f'Literature search for "{query}"{years}: {total} paper{"" if total == 1 else "s"} match{"es" if total == 1 else ""}'
    header += f"; showing {len(papers)}" if papers else "; none to show"
    if withheld:
        header += f" ({withheld_note(withheld)})"
    header += "."
    body = [render_paper(i, p) for i, p in enumerate(papers, start=1)]
    tail = []
    if papers and any(p.pdf_url for p in papers):
        tail.append("Read an open-access PDF with: read_pdf <PDF link> [pages]")
    return "\n\n".join([header, *body, *tail])

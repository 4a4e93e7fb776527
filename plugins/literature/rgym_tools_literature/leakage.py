"""Leakage control for ``literature_search``: the core's policy applied to papers.

The policy itself (settings, URL patterns, identifiers, policy files) lives in
:mod:`rgym_core.leakage`, shared with every tool that reaches outside the
sandbox.  A task declares it under ``tool_config.leakage`` (every tool) or
``tool_config.literature`` (this tool only).  Withheld results are counted,
never shown.
"""

from __future__ import annotations

import datetime as dt

from rgym_core import (
    KNOWN_KEYS,
    LeakageConfigError,
    LeakagePolicy,
    normalise_id,
    normalise_title,
    normalise_url,
)
from rgym_tools_literature.client import Paper


def paper_urls(paper: Paper) -> list[str]:
    """The pages a paper is found at (its links, its Semantic Scholar, arXiv and DOI pages)."""
    urls = [u for u in (paper.url, paper.pdf_url) if u]
    urls.append(f"https://www.semanticscholar.org/paper/{paper.paper_id}")
    arxiv = paper.external_ids.get("ArXiv")
    if arxiv:
        urls += [f"https://arxiv.org/abs/{arxiv}", f"https://arxiv.org/pdf/{arxiv}"]
    doi = paper.external_ids.get("DOI")
    if doi:
        urls.append(f"https://doi.org/{doi}")
    return urls


def publication_date(paper: Paper) -> dt.date | None:
    if paper.publication_date:
        try:
            return dt.date.fromisoformat(paper.publication_date[:10])
        except ValueError:
            return None
    return None


def withhold_reason(policy: LeakagePolicy, paper: Paper) -> str | None:
    """Why ``policy`` withholds ``paper`` (see :meth:`LeakagePolicy.withhold_reason`)."""
    return policy.withhold_reason(ids=[paper.paper_id, *paper.external_ids.values()], title=paper.title,
                                  urls=paper_urls(paper), published=publication_date(paper),
                                  year=paper.year)


__all__ = ["KNOWN_KEYS", "LeakageConfigError", "LeakagePolicy", "normalise_id", "normalise_title",
           "normalise_url", "paper_urls", "publication_date", "withhold_reason"]

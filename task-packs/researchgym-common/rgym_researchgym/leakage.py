"""From ``blocked_urls.yaml`` to rgym's leakage policy for the literature and PDF tools.

ResearchGym lists URLs (``urls``: substrings such as ``arxiv.org/abs/2506.05035``)
and globs (``patterns``: ``*TIMING*ICML*``).  rgym's policy
(``tool_config.literature``, shared by ``read_pdf``) takes
``blocked_url_patterns`` (globs, case-insensitive, matched against the URL
without its scheme and ``www.``) and ``blocked_papers`` (arXiv ids, DOIs,
titles).  The conversion:

* each URL becomes the glob ``*<url>*`` (a URL *containing* it is blocked,
  with the scheme and ``www.`` stripped from the entry first);
* each pattern is used as given;
* every arXiv id found in the URLs and patterns is also blocked as a paper,
  so search results for the paper are withheld even when they carry no URL.

:func:`policy_config` returns that mapping; :func:`write_policy` stores it as
JSON next to the grader's private files, from where packs feed it to the tools.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rgym_researchgym.cache import POLICY_FILE
from rgym_researchgym.taskdir import BlockedUrls

_ARXIV_ID = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")


def url_pattern(url: str) -> str:
    """The glob that blocks every URL containing ``url``."""
    text = url.strip()
    for prefix in ("https://", "http://"):
        if text.lower().startswith(prefix):
            text = text[len(prefix):]
    if text.lower().startswith("www."):
        text = text[4:]
    return f"*{text}*"


def arxiv_ids(blocked: BlockedUrls) -> list[str]:
    """Every arXiv id named in the URLs or patterns, in order of appearance."""
    seen: dict[str, None] = {}
    for text in (*blocked.urls, *blocked.patterns):
        for match in _ARXIV_ID.finditer(text):
            seen.setdefault(match.group(1), None)
    return list(seen)


def policy_config(blocked: BlockedUrls) -> dict[str, Any]:
    """rgym's leakage settings (``blocked_url_patterns``, ``blocked_papers``) for ``blocked``."""
    patterns: dict[str, None] = {}
    for url in blocked.urls:
        patterns.setdefault(url_pattern(url), None)
    for pattern in blocked.patterns:
        patterns.setdefault(pattern, None)
    return {"blocked_url_patterns": list(patterns), "blocked_papers": arxiv_ids(blocked)}


def write_policy(blocked: BlockedUrls, folder: Path) -> Path:
    """Write :func:`policy_config` as ``folder/leakage_policy.json`` and return its path."""
    path = folder / POLICY_FILE
    path.write_text(json.dumps(policy_config(blocked), indent=2) + "\n", encoding="utf-8")
    return path

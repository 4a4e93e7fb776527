"""Leakage control: which papers and URLs a task hides from the agent.

A research task reproducing a paper must not let the agent read that paper.
The task declares, in ``tool_config.literature`` of its ``task.yaml``::

    cutoff_date: 2024-01-01          # papers published on or after it are withheld
    blocked_papers: [<S2 paperId | DOI | arXiv id | exact title>, ...]
    blocked_url_patterns: ["arxiv.org/abs/2401.12345*", "github.com/owner/repo"]
    withhold_undated: false          # also withhold papers with no year or date

Withheld results are counted, never shown.  The same policy blocks URLs for
``read_pdf`` (a URL of a blocked arXiv paper or DOI, or one matching a pattern).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import define, field

from rgym_tools_literature.client import Paper

KNOWN_KEYS = ("cutoff_date", "blocked_papers", "blocked_url_patterns", "withhold_undated")

_ARXIV_NEW = re.compile(r"^\d{4}\.\d{4,5}$")
_ARXIV_OLD = re.compile(r"^[a-z\-]+(\.[a-z]{2})?/\d{7}$")
_ARXIV_IN_URL = re.compile(r"(\d{4}\.\d{4,5}|[a-z\-]+(?:\.[a-z]{2})?/\d{7})(?:v\d+)?")
_PREFIXES = ("https://", "http://", "www.", "doi.org/", "dx.doi.org/", "arxiv.org/abs/",
             "arxiv.org/pdf/", "doi:", "arxiv:")


class LeakageConfigError(ValueError):
    """The task's leakage settings are malformed; the message names the key and the fix."""


def normalise_id(value: str) -> str:
    """A comparable identifier: lower case, without URL/``doi:``/``arXiv:`` prefixes,
    ``.pdf`` suffixes or arXiv version suffixes."""
    ident = value.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if ident.startswith(prefix):
                ident = ident[len(prefix):]
                changed = True
    ident = ident.removesuffix(".pdf")
    if ident.startswith("10.48550/arxiv."):
        ident = ident[len("10.48550/arxiv."):]
    base = re.sub(r"v\d+$", "", ident)
    if _ARXIV_NEW.match(base) or _ARXIV_OLD.match(base):
        return base
    return ident


def normalise_title(value: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", value.lower()).split())


def normalise_url(value: str) -> str:
    url = value.strip().lower()
    for prefix in ("https://", "http://", "www."):
        url = url.removeprefix(prefix)
    return url


def _is_arxiv(ident: str) -> bool:
    return bool(_ARXIV_NEW.match(ident) or _ARXIV_OLD.match(ident))


def _parse_date(value: Any, key: str) -> dt.date | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return dt.date(value, 1, 1)
    if isinstance(value, str):
        text = value.strip()
        for fmt in ("%Y-%m-%d", "%Y-%m", "%Y"):
            try:
                return dt.datetime.strptime(text, fmt).date()
            except ValueError:
                continue
    raise LeakageConfigError(f"{key}: expected a date like 2024-01-01 (or 2024-01, 2024), "
                             f"got {value!r}")


def _str_list(config: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = config.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise LeakageConfigError(f"{where}.{key}: expected a list of strings, got {value!r}")
    return [str(v) for v in value if str(v).strip()]


def _publication_date(paper: Paper) -> dt.date | None:
    if paper.publication_date:
        try:
            return dt.date.fromisoformat(paper.publication_date[:10])
        except ValueError:
            return None
    return None


@define(frozen=True)
class LeakagePolicy:
    """What a task withholds; the empty policy withholds nothing."""

    cutoff_date: dt.date | None = None
    blocked_ids: frozenset[str] = field(factory=frozenset)
    blocked_titles: frozenset[str] = field(factory=frozenset)
    blocked_url_patterns: tuple[str, ...] = ()
    withhold_undated: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, *,
                    where: str = "tool_config.literature",
                    extra_keys: Iterable[str] = ()) -> LeakagePolicy:
        """Build a policy from a task's tool config; unknown keys and bad values raise
        :class:`LeakageConfigError` naming ``where.key``."""
        config = config or {}
        if not isinstance(config, Mapping):
            raise LeakageConfigError(f"{where}: expected a mapping of settings, got {config!r}")
        known = set(KNOWN_KEYS) | set(extra_keys)
        unknown = sorted(set(config) - known)
        if unknown:
            raise LeakageConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                                     f"known keys: {', '.join(sorted(known))}")
        blocked = _str_list(config, "blocked_papers", where)
        patterns = _str_list(config, "blocked_url_patterns", where)
        undated = config.get("withhold_undated", False)
        if not isinstance(undated, bool):
            raise LeakageConfigError(f"{where}.withhold_undated: expected true or false, "
                                     f"got {undated!r}")
        return cls(
            cutoff_date=_parse_date(config.get("cutoff_date"), f"{where}.cutoff_date"),
            blocked_ids=frozenset(normalise_id(b) for b in blocked),
            blocked_titles=frozenset(t for t in (normalise_title(b) for b in blocked) if t),
            blocked_url_patterns=tuple(normalise_url(p) for p in patterns),
            withhold_undated=undated,
        )

    @property
    def active(self) -> bool:
        return bool(self.cutoff_date or self.blocked_ids or self.blocked_url_patterns
                    or self.withhold_undated)

    def year_to(self, year_to: int | None) -> int | None:
        """The last year worth asking the API for under the cutoff date."""
        if self.cutoff_date is None:
            return year_to
        last = self.cutoff_date.year - (1 if self.cutoff_date.timetuple().tm_yday == 1 else 0)
        return last if year_to is None else min(year_to, last)

    def paper_urls(self, paper: Paper) -> list[str]:
        urls = [u for u in (paper.url, paper.pdf_url) if u]
        urls.append(f"https://www.semanticscholar.org/paper/{paper.paper_id}")
        arxiv = paper.external_ids.get("ArXiv")
        if arxiv:
            urls += [f"https://arxiv.org/abs/{arxiv}", f"https://arxiv.org/pdf/{arxiv}"]
        doi = paper.external_ids.get("DOI")
        if doi:
            urls.append(f"https://doi.org/{doi}")
        return urls

    def withhold_reason(self, paper: Paper) -> str | None:
        """``blocked_paper``, ``blocked_url``, ``after_cutoff``, ``undated`` or ``None``."""
        ids = {normalise_id(paper.paper_id)} | {normalise_id(v) for v in paper.external_ids.values()}
        if ids & self.blocked_ids or normalise_title(paper.title) in self.blocked_titles:
            return "blocked_paper"
        if any(self.url_blocked(u) for u in self.paper_urls(paper)):
            return "blocked_url"
        date = _publication_date(paper)
        if self.cutoff_date is not None:
            if date is not None:
                if date >= self.cutoff_date:
                    return "after_cutoff"
            elif paper.year is not None:
                if paper.year >= self.cutoff_date.year:
                    return "after_cutoff"
        if self.withhold_undated and date is None and paper.year is None:
            return "undated"
        return None

    def url_blocked(self, url: str) -> bool:
        """Whether ``url`` matches a blocked pattern or points at a blocked arXiv paper or DOI."""
        norm = normalise_url(url)
        for pattern in self.blocked_url_patterns:
            if any(ch in pattern for ch in "*?["):
                if fnmatch.fnmatchcase(norm, pattern) or fnmatch.fnmatchcase(norm, pattern + "*"):
                    return True
            elif pattern in norm:
                return True
        if "arxiv.org" in norm:
            for m in _ARXIV_IN_URL.finditer(norm.split("/", 1)[-1]):
                if m.group(1) in self.blocked_ids:
                    return True
        return any(not _is_arxiv(i) and "/" in i and i.startswith("10.") and i in norm
                   for i in self.blocked_ids)

"""Leakage control: which papers and URLs a task hides from the agent.

A research task reproducing a paper must not let the agent read that paper.  The
core holds the policy so that every tool reaching outside the sandbox (literature
search, PDF reading, web fetching...) applies the same one, and no tool pack
imports another.

A task declares its policy in ``tool_config`` of its ``task.yaml``, once for every
tool under ``leakage`` (and, for compatibility, under a tool's own key)::

    tool_config:
      leakage:
        cutoff_date: 2024-01-01        # papers published on or after it are withheld
        blocked_papers: [<S2 paperId | DOI | arXiv id | exact title>, ...]
        blocked_url_patterns: ["arxiv.org/abs/2401.12345*", "github.com/owner/repo"]
        withhold_undated: false        # also withhold papers with no year or date
        policy_files: [leakage.json]   # more of the same, read when the episode starts

A URL pattern with ``*``, ``?`` or ``[`` is a glob over the URL without its scheme
and ``www.``; any other pattern blocks every URL containing it.  ``policy_files``
are JSON or YAML files (relative paths are relative to the task folder) holding the
same keys, or a ResearchGym ``blocked_urls.yaml`` (``urls:`` substrings and
``patterns:`` globs, see :meth:`LeakagePolicy.from_blocked_urls`); a listed file
that is missing is an error (the policy fails closed).  Policies merge by union
(:meth:`LeakagePolicy.merged`): the earliest cutoff wins.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

#: The ``tool_config`` key every tool reads its leakage policy from.
CONFIG_KEY = "leakage"
KNOWN_KEYS = ("cutoff_date", "blocked_papers", "blocked_url_patterns", "withhold_undated", "policy_files")

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
    if is_arxiv_id(base):
        return base
    return ident


def normalise_title(value: str) -> str:
    """A comparable title: lower case letters and digits, single spaces."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", value.lower()).split())


def normalise_url(value: str) -> str:
    """A URL as patterns see it: lower case, without the scheme and ``www.``."""
    url = value.strip().lower()
    for prefix in ("https://", "http://", "www."):
        url = url.removeprefix(prefix)
    return url


def is_arxiv_id(ident: str) -> bool:
    return bool(_ARXIV_NEW.match(ident) or _ARXIV_OLD.match(ident))


def arxiv_ids_in(url: str) -> list[str]:
    """The arXiv identifiers in an arxiv.org URL (none for other hosts)."""
    norm = normalise_url(url)
    host = norm.split("/", 1)[0]
    if not (host == "arxiv.org" or host.endswith(".arxiv.org")):
        return []
    return [m.group(1) for m in _ARXIV_IN_URL.finditer(norm.split("/", 1)[-1])]


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
    raise LeakageConfigError(f"{key}: expected a date like 2024-01-01 (or 2024-01, 2024), got {value!r}")


def _str_list(config: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = config.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise LeakageConfigError(f"{where}.{key}: expected a list of strings, got {value!r}")
    return [str(v) for v in value if str(v).strip()]


def _read_file(path: Path, where: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LeakageConfigError(f"{where}: cannot read the policy file {path} ({exc.strerror or exc}); "
                                 f"the leakage policy fails closed") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        from rgym_core.serialization import parse_yaml

        return parse_yaml(text)
    except ValueError as exc:  # json.JSONDecodeError and yaml errors
        raise LeakageConfigError(f"{where}: {path} is not valid JSON/YAML ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError without importing yaml here
        raise LeakageConfigError(f"{where}: {path} is not valid YAML ({exc})") from None


@define(frozen=True)
class LeakagePolicy:
    """What a task withholds; the empty policy withholds nothing."""

    cutoff_date: dt.date | None = None
    blocked_ids: frozenset[str] = field(factory=frozenset)
    blocked_titles: frozenset[str] = field(factory=frozenset)
    blocked_url_patterns: tuple[str, ...] = ()
    withhold_undated: bool = False

    # -- building ------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, *, where: str = "tool_config.leakage",
                    extra_keys: Iterable[str] = (), base_dir: Path | None = None) -> LeakagePolicy:
        """Build a policy from a task's settings (the keys in the module docstring).

        Keys in ``extra_keys`` are ignored (a tool's own settings beside the policy);
        other unknown keys and bad values raise :class:`LeakageConfigError` naming
        ``where.key``.  ``policy_files`` are read now, relative to ``base_dir``.
        """
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
            raise LeakageConfigError(f"{where}.withhold_undated: expected true or false, got {undated!r}")
        policy = cls(
            cutoff_date=_parse_date(config.get("cutoff_date"), f"{where}.cutoff_date"),
            blocked_ids=frozenset(normalise_id(b) for b in blocked),
            blocked_titles=frozenset(t for t in (normalise_title(b) for b in blocked) if t),
            blocked_url_patterns=tuple(normalise_url(p) for p in patterns),
            withhold_undated=undated,
        )
        files = [policy]
        for name in _str_list(config, "policy_files", where):
            path = Path(name).expanduser()
            if not path.is_absolute():
                if base_dir is None:
                    raise LeakageConfigError(f"{where}.policy_files: '{name}' is relative, but the "
                                             f"task folder is unknown; give an absolute path")
                path = base_dir / path
            files.append(cls.from_file(path, where=f"{where}.policy_files"))
        return cls.merged(*files)

    @classmethod
    def from_file(cls, path: Path, *, where: str = "policy file") -> LeakagePolicy:
        """A policy from a JSON/YAML file of :data:`KNOWN_KEYS` (``policy_files`` not
        followed), or from a ResearchGym ``blocked_urls.yaml``."""
        data = _read_file(path, where) or {}
        if not isinstance(data, Mapping):
            raise LeakageConfigError(f"{where}: {path} must hold a mapping, got {type(data).__name__}")
        if set(data) & {"urls", "patterns"} and not set(data) & set(KNOWN_KEYS):
            return cls.from_blocked_urls(data, where=str(path))
        if "policy_files" in data:
            raise LeakageConfigError(f"{where}: {path} may not list more policy_files")
        return cls.from_config(data, where=str(path))

    @classmethod
    def from_blocked_urls(cls, data: Mapping[str, Any], *, where: str = "blocked_urls.yaml") -> LeakagePolicy:
        """A policy from ResearchGym's ``blocked_urls.yaml``: its ``urls`` block every URL
        containing them (and the arXiv papers they name are withheld from searches);
        its ``patterns`` are globs over URLs, used as given."""
        unknown = sorted(set(data) - {"urls", "patterns"})
        if unknown:
            raise LeakageConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                                     f"a blocked_urls.yaml has 'urls' and 'patterns'")
        urls = _str_list(data, "urls", where)
        patterns = _str_list(data, "patterns", where)
        arxiv = {i for url in urls for i in arxiv_ids_in(url)}
        return cls(blocked_ids=frozenset(arxiv),
                   blocked_url_patterns=tuple(normalise_url(p) for p in [*urls, *patterns]))

    def merged(self, *others: LeakagePolicy) -> LeakagePolicy:
        """The union of this policy and ``others`` (the earliest cutoff date)."""
        policies = [self, *others]
        cutoffs = [p.cutoff_date for p in policies if p.cutoff_date is not None]
        patterns: list[str] = []
        for p in policies:
            patterns.extend(x for x in p.blocked_url_patterns if x not in patterns)
        return LeakagePolicy(
            cutoff_date=min(cutoffs) if cutoffs else None,
            blocked_ids=frozenset().union(*(p.blocked_ids for p in policies)),
            blocked_titles=frozenset().union(*(p.blocked_titles for p in policies)),
            blocked_url_patterns=tuple(patterns),
            withhold_undated=any(p.withhold_undated for p in policies))

    def to_config(self) -> dict[str, Any]:
        """The policy as settings (for a policy file); ``from_config`` reads it back."""
        from_ids = {normalise_title(i) for i in self.blocked_ids}
        return {"cutoff_date": self.cutoff_date.isoformat() if self.cutoff_date else None,
                "blocked_papers": sorted(self.blocked_ids) + sorted(self.blocked_titles - from_ids),
                "blocked_url_patterns": list(self.blocked_url_patterns),
                "withhold_undated": self.withhold_undated}

    # -- asking --------------------------------------------------------------

    @property
    def active(self) -> bool:
        return bool(self.cutoff_date or self.blocked_ids or self.blocked_titles
                    or self.blocked_url_patterns or self.withhold_undated)

    def year_to(self, year_to: int | None) -> int | None:
        """The last year worth asking a search API for under the cutoff date."""
        if self.cutoff_date is None:
            return year_to
        last = self.cutoff_date.year - (1 if self.cutoff_date.timetuple().tm_yday == 1 else 0)
        return last if year_to is None else min(year_to, last)

    def url_blocked(self, url: str) -> bool:
        """Whether ``url`` matches a blocked pattern or points at a blocked arXiv paper or DOI."""
        norm = normalise_url(url)
        for pattern in self.blocked_url_patterns:
            if any(ch in pattern for ch in "*?["):
                if fnmatch.fnmatchcase(norm, pattern) or fnmatch.fnmatchcase(norm, pattern + "*"):
                    return True
            elif pattern in norm:
                return True
        if any(i in self.blocked_ids for i in arxiv_ids_in(url)):
            return True
        return any(not is_arxiv_id(i) and "/" in i and i.startswith("10.") and i in norm
                   for i in self.blocked_ids)

    def withhold_reason(self, *, ids: Iterable[str] = (), title: str = "", urls: Iterable[str] = (),
                        published: dt.date | None = None, year: int | None = None) -> str | None:
        """Why a publication is withheld: ``blocked_paper``, ``blocked_url``,
        ``after_cutoff``, ``undated``, or ``None`` when it may be shown.

        ``ids`` are its identifiers (S2 id, DOI, arXiv id...), ``urls`` the pages it
        is found at, ``published`` its date and ``year`` its year when the date is
        unknown.
        """
        if {normalise_id(i) for i in ids if i} & self.blocked_ids or \
                (title and normalise_title(title) in self.blocked_titles):
            return "blocked_paper"
        if any(self.url_blocked(u) for u in urls if u):
            return "blocked_url"
        if self.cutoff_date is not None:
            if published is not None:
                if published >= self.cutoff_date:
                    return "after_cutoff"
            elif year is not None and year >= self.cutoff_date.year:
                return "after_cutoff"
        if self.withhold_undated and published is None and year is None:
            return "undated"
        return None


def task_policy(tool_config: Mapping[str, Any] | None, tool_key: str | None = None, *,
            task_id: str = "task", base_dir: Path | None = None,
            tool_keys: Iterable[str] = ()) -> LeakagePolicy:
    """The leakage policy a tool applies for a task: ``tool_config.leakage``
    merged with the policy keys under the tool's own key (``tool_config.<tool_key>``,
    where ``tool_keys`` are the tool's other settings).  Raises
    :class:`LeakageConfigError` naming the task and the key."""
    tool_config = tool_config or {}
    shared = LeakagePolicy.from_config(tool_config.get(CONFIG_KEY),
                                       where=f"{task_id}: tool_config.{CONFIG_KEY}", base_dir=base_dir)
    if tool_key is None:
        return shared
    own = tool_config.get(tool_key) or {}
    if not isinstance(own, Mapping):
        raise LeakageConfigError(f"{task_id}: tool_config.{tool_key}: expected a mapping of settings, "
                                 f"got {own!r}")
    mine = LeakagePolicy.from_config({k: v for k, v in own.items() if k in KNOWN_KEYS},
                                     where=f"{task_id}: tool_config.{tool_key}", base_dir=base_dir)
    unknown = sorted(set(own) - set(KNOWN_KEYS) - set(tool_keys))
    if unknown:
        raise LeakageConfigError(f"{task_id}: tool_config.{tool_key}: unknown key(s) "
                                 f"{', '.join(map(repr, unknown))}; known keys: "
                                 f"{', '.join(sorted({*KNOWN_KEYS, *tool_keys}))}")
    return shared.merged(mine)

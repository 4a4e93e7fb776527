"""An on-disk cache of literature searches, one JSON file per request, with a TTL.

The key is (API base URL, normalised query, limit, year range), so a repeated
search costs no request.  Results are stored *before* the leakage filter, so
every task applies its own policy to cached results too.  Errors are never
cached; a corrupt or expired file is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rgym_tools_literature.client import Paper, SearchResult

#: Default time-to-live of a cached search: one week.
DEFAULT_TTL_S = 7 * 24 * 3600.0
_VERSION = 1


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """``$RGYM_CACHE_DIR/literature``, else ``~/.cache/rgym/literature``."""
    env = dict(os.environ) if env is None else env
    root = env.get("RGYM_CACHE_DIR")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "rgym") / "literature"


def ttl_from_env(env: dict[str, str] | None = None) -> float:
    """``RGYM_LITERATURE_CACHE_TTL_S`` (seconds, 0 disables the cache), else one week."""
    env = dict(os.environ) if env is None else env
    raw = env.get("RGYM_LITERATURE_CACHE_TTL_S")
    if raw is None or raw == "":
        return DEFAULT_TTL_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise ValueError(f"RGYM_LITERATURE_CACHE_TTL_S must be a number of seconds, got {raw!r}; "
                         "unset it for the default of one week") from None


def normalise_query(query: str) -> str:
    return " ".join(query.lower().split())


class SearchCache:
    """Cached :class:`~rgym_tools_literature.client.SearchResult` files under ``directory``."""

    def __init__(self, directory: Path, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.directory = Path(directory)
        self.ttl_s = ttl_s

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0

    def key(self, base_url: str, query: str, limit: int, year_from: int | None,
            year_to: int | None) -> str:
        ident = json.dumps({"v": _VERSION, "base": base_url, "q": normalise_query(query),
                            "limit": limit, "from": year_from, "to": year_to}, sort_keys=True)
        return hashlib.sha256(ident.encode()).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str, *, now: float | None = None) -> SearchResult | None:
        """The cached result, or ``None`` when absent, expired or unreadable."""
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            entry: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            created = float(entry["created"])
            if (time.time() if now is None else now) - created > self.ttl_s:
                return None
            papers = [Paper.from_api(p) for p in entry["papers"]]
            return SearchResult(total=int(entry["total"]), papers=papers)
        except FileNotFoundError:
            return None
        except Exception:  # a corrupt entry is a miss, and is removed
            with contextlib.suppress(OSError):
                path.unlink()
            return None

    def put(self, key: str, result: SearchResult, *, now: float | None = None) -> None:
        """Store ``result`` atomically; a cache that cannot be written is skipped."""
        if not self.enabled:
            return
        entry = {"created": time.time() if now is None else now, "total": result.total,
                 "papers": [p.to_api() for p in result.papers]}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh)
            os.replace(tmp, self._path(key))
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

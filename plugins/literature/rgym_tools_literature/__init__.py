"""rgym-tools-literature: Semantic Scholar literature search for rgym agents, with
retries, an on-disk cache and task leakage control.  Names are imported on first use."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {
    "LeakageConfigError": "rgym_core",
    "LeakagePolicy": "rgym_core",
    "LiteratureSearchTool": "rgym_tools_literature.tool",
    "Paper": "rgym_tools_literature.client",
    "RequestFailed": "rgym_core",
    "RetryPolicy": "rgym_core",
    "SearchResult": "rgym_tools_literature.client",
    "SemanticScholarClient": "rgym_tools_literature.client",
    "call_with_retries": "rgym_core",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "LeakageConfigError", "LeakagePolicy", "LiteratureSearchTool", "Paper", "RequestFailed",
    "RetryPolicy", "SearchResult", "SemanticScholarClient", "call_with_retries",
]

if TYPE_CHECKING:
    from rgym_core import (
        LeakageConfigError,
        LeakagePolicy,
        RequestFailed,
        RetryPolicy,
        call_with_retries,
    )
    from rgym_tools_literature.client import Paper, SearchResult, SemanticScholarClient
    from rgym_tools_literature.tool import LiteratureSearchTool

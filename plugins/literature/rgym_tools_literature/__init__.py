"""rgym-tools-literature: Semantic Scholar literature search for rgym agents, with
retries, an on-disk cache and task leakage control."""

from rgym_core.http import RequestFailed, RetryPolicy, call_with_retries
from rgym_tools_literature.client import Paper, SearchResult, SemanticScholarClient
from rgym_tools_literature.leakage import LeakageConfigError, LeakagePolicy
from rgym_tools_literature.tool import LiteratureSearchTool

__all__ = ["LeakageConfigError", "LeakagePolicy", "LiteratureSearchTool", "Paper",
           "RequestFailed", "RetryPolicy", "SearchResult", "SemanticScholarClient",
           "call_with_retries"]

"""rgym's memory tools: ``memory_write`` and ``memory_read`` over FAISS and MiniLM
embeddings.  Names are imported on first use (numpy and faiss are heavy)."""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

_EXPORTS = {
    "Embedder": "rgym_tools_memory.embedders",
    "HashingEmbedder": "rgym_tools_memory.embedders",
    "IndexConfig": "rgym_tools_memory.index",
    "MemoryReadTool": "rgym_tools_memory.tools",
    "MemoryRecord": "rgym_tools_memory.store",
    "MemoryStore": "rgym_tools_memory.store",
    "MemoryWriteTool": "rgym_tools_memory.tools",
    "MiniLMEmbedder": "rgym_tools_memory.embedders",
    "SearchHit": "rgym_tools_memory.store",
    "VectorIndex": "rgym_tools_memory.index",
    "make_embedder": "rgym_tools_memory.embedders",
    "memory_tools": "rgym_tools_memory.tools",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "Embedder", "HashingEmbedder", "IndexConfig", "MemoryReadTool", "MemoryRecord",
    "MemoryStore", "MemoryWriteTool", "MiniLMEmbedder", "SearchHit", "VectorIndex",
    "make_embedder", "memory_tools",
]

if TYPE_CHECKING:
    from rgym_tools_memory.embedders import Embedder, HashingEmbedder, MiniLMEmbedder, make_embedder
    from rgym_tools_memory.index import IndexConfig, VectorIndex
    from rgym_tools_memory.store import MemoryRecord, MemoryStore, SearchHit
    from rgym_tools_memory.tools import MemoryReadTool, MemoryWriteTool, memory_tools

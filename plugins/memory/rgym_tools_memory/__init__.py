"""rgym's memory tools: ``memory_write`` and ``memory_read`` over FAISS and MiniLM embeddings."""

from rgym_tools_memory.embedders import Embedder, HashingEmbedder, MiniLMEmbedder, make_embedder
from rgym_tools_memory.index import IndexConfig, VectorIndex
from rgym_tools_memory.store import MemoryRecord, MemoryStore, SearchHit
from rgym_tools_memory.tools import MemoryReadTool, MemoryWriteTool, memory_tools

__all__ = ["Embedder", "HashingEmbedder", "IndexConfig", "MemoryReadTool", "MemoryRecord",
           "MemoryStore", "MemoryWriteTool", "MiniLMEmbedder", "SearchHit", "VectorIndex",
           "make_embedder", "memory_tools"]

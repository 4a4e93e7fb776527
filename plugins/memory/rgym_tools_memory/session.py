"""One episode's memory: settings, the shared store, where it is loaded from and saved to.

Both memory tools call :func:`open_session` in ``start`` (whichever runs first
creates the store, in ``ctx.state["memory_store"]``) and :func:`close_session`
in ``stop`` (the first call saves, later calls do nothing).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from attrs import define, field

from rgym_tools_memory.embedders import Embedder, MiniLMEmbedder, make_embedder
from rgym_tools_memory.index import IndexConfig
from rgym_tools_memory.persistence import SaveInfo, load_store, save_store
from rgym_tools_memory.store import MemoryStore

STORE_KEY = "memory_store"
SESSION_KEY = "memory_session"
PERSIST_ENV = "RGYM_MEMORY_PERSIST"
DIR_ENV = "RGYM_MEMORY_DIR"
DEFAULT_ROOT = Path("~/.cache/rgym/memory")

Persist = Literal["episode", "task"]
_CONFIG_KEYS = {"embedder", "persist", "dir", "approx_threshold", "merge_every", "target_recall"}


@define(frozen=True)
class MemorySettings:
    """How an episode's memory behaves; read from the tool config, then the environment.

    Tool config keys (a task's ``tool_config`` for ``memory_write``/``memory_read``):
    ``embedder`` (``minilm``/``hashing``; env ``RGYM_MEMORY_EMBEDDER``), ``persist``
    (``episode`` or ``task``; env ``RGYM_MEMORY_PERSIST``), ``dir`` (root of the
    cross-episode stores; env ``RGYM_MEMORY_DIR``, default ``~/.cache/rgym/memory``),
    ``approx_threshold``, ``merge_every`` and ``target_recall`` (see :class:`IndexConfig`).
    """

    embedder: str | None = None
    persist: Persist = "episode"
    root: Path = DEFAULT_ROOT
    index: IndexConfig = field(factory=IndexConfig)

    @classmethod
    def from_config(cls, config: dict[str, Any] | None,
                    environ: dict[str, str] | None = None) -> MemorySettings:
        config = dict(config or {})
        env = os.environ if environ is None else environ
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise ValueError(f"memory tool config: unknown key(s) {', '.join(unknown)}; "
                             f"known keys: {', '.join(sorted(_CONFIG_KEYS))}")
        persist = str(config.get("persist") or env.get(PERSIST_ENV) or "episode").lower()
        if persist not in ("episode", "task"):
            raise ValueError(f"memory tool config: 'persist' (or {PERSIST_ENV}) must be "
                             f"'episode' or 'task', got {persist!r}")
        root = Path(str(config.get("dir") or env.get(DIR_ENV) or DEFAULT_ROOT)).expanduser()
        defaults = IndexConfig()
        try:
            index = IndexConfig(
                approx_threshold=int(config.get("approx_threshold", defaults.approx_threshold)),
                merge_every=int(config.get("merge_every", defaults.merge_every)),
                target_recall=float(config.get("target_recall", defaults.target_recall)),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"memory tool config: bad index setting ({exc})") from None
        return cls(embedder=config.get("embedder"), persist=persist,  # type: ignore[arg-type]
                   root=root, index=index)

    def task_folder(self, task_id: str) -> Path:
        """The cross-episode store of ``task_id`` (``pack/name`` -> ``pack__name``)."""
        return self.root / re.sub(r"[^A-Za-z0-9._-]+", "_", task_id.replace("/", "__"))


@define
class MemorySession:
    """An episode's store and where it persists."""

    settings: MemorySettings
    store: MemoryStore
    run_folder: Path
    task_folder: Path | None
    loaded: int = 0
    closed: bool = False
    saved: list[SaveInfo] = field(factory=list)


def tool_config(ctx: Any) -> dict[str, Any]:
    """The memory settings of an episode: the task's ``tool_config`` entries for
    ``memory`` and either tool (short or full name), then ``ctx.tool_config``."""
    merged: dict[str, Any] = {}
    task_config = getattr(ctx.task, "tool_config", None) or {}
    for key in ("memory", "memory_write", "memory_read", "memory/memory_write",
                "memory/memory_read"):
        merged.update(task_config.get(key) or {})
    merged.update(ctx.tool_config or {})
    return merged


def open_session(ctx: Any) -> MemorySession:
    """The episode's memory session, created (and loaded) on the first call."""
    session = ctx.state.get(SESSION_KEY)
    if session is not None:
        return session
    settings = MemorySettings.from_config(tool_config(ctx))
    embedder: Embedder = make_embedder(settings.embedder)
    if isinstance(embedder, MiniLMEmbedder):
        embedder.preload()
    task_folder = settings.task_folder(ctx.task.id) if settings.persist == "task" else None
    store = load_store(task_folder, embedder, settings.index) if task_folder else None
    loaded = store.count if store is not None else 0
    store = store or MemoryStore(embedder, settings.index)
    session = MemorySession(settings=settings, store=store,
                            run_folder=Path(ctx.run_dir) / "memory",
                            task_folder=task_folder, loaded=loaded)
    ctx.state[SESSION_KEY] = session
    ctx.state[STORE_KEY] = store
    return session


def close_session(ctx: Any) -> list[SaveInfo]:
    """Save the episode's memory (run directory, and the task's store when enabled) once."""
    session: MemorySession | None = ctx.state.get(SESSION_KEY)
    if session is None or session.closed:
        return []
    session.closed = True
    session.store.index.wait(timeout=10)  # save a fresh HNSW index if one is nearly built
    session.saved.append(save_store(session.run_folder, session.store))
    if session.task_folder is not None:
        session.saved.append(save_store(session.task_folder, session.store, merge=True))
    return session.saved

"""Limits of a confined worker (standard library only, cheap to import)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Limits of one confined worker (and every process it starts).

    ``wall_s``: wall-clock lifetime, then the worker is killed; ``memory_mb``: data
    segment per process (``RLIMIT_DATA``: heap and anonymous memory), ``None`` for none;
    ``pids``: processes and threads of the worker user (``RLIMIT_NPROC``);
    ``cpu_s``: CPU seconds per process; ``file_mb``: largest file it may write;
    ``open_files``: open file descriptors per process.
    """

    wall_s: float = 600.0
    memory_mb: int | None = 2048
    pids: int = 64
    cpu_s: float | None = None
    file_mb: int = 1024
    open_files: int = 256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

"""What lifecycle hooks receive about a running episode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.agents import EpisodeStatus
from rgym_core.specs import Budget, TaskSpec


@define
class EpisodeInfo:
    """Facts about one episode, passed to every lifecycle hook."""

    run_id: str
    run_dir: Path
    task: TaskSpec
    agent: str
    model: str | None
    sandbox: str
    budget: Budget
    seed: int | None
    status: EpisodeStatus
    tools: list[str] = field(factory=list)
    extras: dict[str, Any] = field(factory=dict)

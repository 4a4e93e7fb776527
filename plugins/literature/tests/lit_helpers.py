"""Shared pieces of the literature tests: a tool context without a sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_core.specs import Metric, TaskSpec
from rgym_core.tools import ToolContext


def make_ctx(tmp_path: Path, tool_config: dict[str, Any] | None = None) -> tuple[ToolContext, list]:
    """A ToolContext for host-side tools, and the list its ``record`` appends to."""
    recorded: list[tuple[str, Any]] = []
    task = TaskSpec(id="test/lit-task", description="a test task", metrics=[Metric("score")])
    ctx = ToolContext(sandbox=None, task=task, run_dir=tmp_path, state={},  # type: ignore[arg-type]
                      grade=lambda kind: None,  # type: ignore[arg-type, return-value]
                      record=lambda k, v: recorded.append((k, v)),
                      tool_config=tool_config or {})
    return ctx, recorded

"""The memory tools through a hand-built ToolContext on a real local sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rgym_tools_memory.session import MemorySettings
from rgym_tools_memory.tools import MemoryReadTool, MemoryWriteTool, memory_tools

from rgym_core.records import ScoreRecord
from rgym_core.registry import load_registry
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox
from rgym_core.specs import Metric, TaskSpec
from rgym_core.tools import ToolContext, ToolError


@pytest.fixture
def sandbox() -> Iterator[LocalSandbox]:
    # the default work root (the system temp folder) is one the agent user can traverse
    box = LocalSandbox(SandboxConfig(run_id="memtest", task_id="test/memory"))
    box.start(WorkspaceLayout())
    yield box
    box.cleanup()


class Episode:
    """One episode's tools and context, with what they recorded."""

    def __init__(self, sandbox: LocalSandbox, run_dir: Path, *,
                 tool_config: dict[str, Any] | None = None,
                 task_config: dict[str, dict[str, Any]] | None = None) -> None:
        self.records: list[tuple[str, Any]] = []
        task = TaskSpec(id="test/memory", description="d", metrics=[Metric("score")],
                        tool_config=task_config or {})
        self.ctx = ToolContext(sandbox=sandbox, task=task, run_dir=run_dir, state={},
                               grade=self._no_grade, record=self._record,
                               tool_config=dict(tool_config or {}), episode_id=run_dir.name)
        self.write, self.read = MemoryWriteTool(), MemoryReadTool()
        for tool in (self.write, self.read):
            tool.start(self.ctx)

    def _no_grade(self, kind: str) -> ScoreRecord:
        raise AssertionError("memory tools never grade")

    def _record(self, key: str, value: Any) -> None:
        self.records.append((key, value))

    def call(self, tool: Any, **args: Any) -> Any:
        self.ctx.step += 1
        return tool.call(tool.schema.bind(args), self.ctx)

    def stop(self) -> None:
        for tool in (self.write, self.read):
            tool.stop(self.ctx)


HASHING = {"embedder": "hashing"}


def test_write_read_status_and_trajectory_records(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ep = Episode(sandbox, tmp_path / "run1", tool_config=HASHING)
    assert ep.ctx.state["memory_store"] is ep.ctx.state["memory_session"].store  # one store
    out = ep.call(ep.write, text="learning rate 0.1 diverged", tags="lr,failed")
    assert out.output.startswith("Saved memory #0 with tags lr, failed")
    ep.call(ep.write, text="batch size 256 was stable", tags=["batch"])
    ep.call(ep.write, text="learning rate 0.01 converged", tags=["lr"])
    result = ep.call(ep.read, query="learning rate diverged", k="2")
    assert result.output.splitlines()[0] == "2 of 3 memories, most similar first:"
    assert "#0 (score " in result.output.splitlines()[1]
    assert "tags: lr, failed | step 1" in result.output
    assert result.info["memory_ids"][0] == 0
    writes = [v for k, v in ep.records if k == "memory" and v["op"] == "write"]
    reads = [v for k, v in ep.records if k == "memory" and v["op"] == "read"]
    assert [w["count"] for w in writes] == [1, 2, 3] and writes[0]["tags"] == ["lr", "failed"]
    assert reads[0]["returned"] == 2 and reads[0]["ids"][0] == 0
    assert reads[0]["latency_ms"] >= reads[0]["search_ms"] >= 0
    assert ep.write.status(ep.ctx) == {"memory_count": 3, "memory_tags": ["lr", "batch", "failed"]}
    tagged = ep.call(ep.read, query="learning rate", tags="batch")
    assert "1 of 3 memories with tags batch" in tagged.output
    ep.stop()
    saved = tmp_path / "run1" / "memory"
    current = (saved / "CURRENT").read_text().strip()
    lines = (saved / "snapshots" / current / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["text"] for line in lines][1] == "batch size 256 was stable"


def test_bad_arguments_are_tool_errors(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ep = Episode(sandbox, tmp_path / "run", tool_config=HASHING)
    assert "Memory is empty" in ep.call(ep.read, query="anything").output
    with pytest.raises(ToolError, match="k must be between 1 and 50"):
        ep.call(ep.read, query="x", k=0)
    with pytest.raises(ToolError, match="memory_write: memory text is empty"):
        ep.call(ep.write, text="  ")
    with pytest.raises(ToolError, match="missing argument 'text'"):
        ep.write.schema.bind({})


def test_bad_config_names_the_key(sandbox: LocalSandbox, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="'persist'.*'episode' or 'task', got 'forever'"):
        Episode(sandbox, tmp_path / "run", tool_config={**HASHING, "persist": "forever"})
    with pytest.raises(ToolError, match="unknown key.*colour"):
        Episode(sandbox, tmp_path / "run", tool_config={"colour": "red"})
    with pytest.raises(ToolError, match="unknown memory embedder 'nope'"):
        Episode(sandbox, tmp_path / "run", tool_config={"embedder": "nope"})


def test_task_persistence_carries_memories_to_the_next_episode(
        sandbox: LocalSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_MEMORY_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("RGYM_MEMORY_PERSIST", "task")
    first = Episode(sandbox, tmp_path / "ep1", task_config={"memory": HASHING})
    first.call(first.write, text="the baseline scores r2 0.61", tags="baseline")
    first.stop()
    first.stop()  # the second tool's stop does nothing more
    assert (tmp_path / "shared" / "test__memory" / "CURRENT").is_file()
    second = Episode(sandbox, tmp_path / "ep2", task_config={"memory_read": HASHING})
    assert second.read.status(second.ctx)["memory_count"] == 1
    hit = second.call(second.read, query="baseline r2 score", k=1)
    assert "the baseline scores r2 0.61" in hit.output
    second.call(second.write, text="feature scaling raised r2 to 0.8", tags="results")
    second.stop()
    monkeypatch.setenv("RGYM_MEMORY_PERSIST", "episode")
    third = Episode(sandbox, tmp_path / "ep3", tool_config=HASHING)
    assert third.read.status(third.ctx)["memory_count"] == 0  # persistence is opt-in


def test_settings_precedence() -> None:
    env = {"RGYM_MEMORY_PERSIST": "task", "RGYM_MEMORY_DIR": "/x", "RGYM_MEMORY_EMBEDDER": "e"}
    assert MemorySettings.from_config({}, env).persist == "task"
    assert MemorySettings.from_config({"persist": "episode"}, env).persist == "episode"
    settings = MemorySettings.from_config({"approx_threshold": "500"}, {})
    assert settings.index.approx_threshold == 500 and settings.persist == "episode"
    assert settings.task_folder("mlgym/blotto").name == "mlgym__blotto"
    assert str(settings.root).endswith(".cache/rgym/memory")


def test_plugin_registers_both_tools_off_by_default() -> None:
    registry = load_registry()
    write = registry.tool("memory/memory_write")
    read = registry.tool("memory_read")
    assert isinstance(write, MemoryWriteTool) and isinstance(read, MemoryReadTool)
    assert not write.default and not read.default
    assert [t.qualified_name for t in memory_tools()] == ["memory/memory_write",
                                                          "memory/memory_read"]
    assert read.schema.to_openai()["function"]["parameters"]["properties"]["tags"]["type"] == "array"

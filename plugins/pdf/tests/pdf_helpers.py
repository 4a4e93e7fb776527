"""Shared pieces of the PDF tests: a folder-backed sandbox and a tool context."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rgym_core.sandbox import ExecResult, Sandbox, WorkspaceLayout
from rgym_core.specs import Metric, TaskSpec
from rgym_core.tools import ToolContext


class FolderSandbox(Sandbox):
    """Just the file API of a sandbox, over a real folder (enough for host-side tools)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = str(root)

    def _path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else self.root / p

    def start(self, layout: WorkspaceLayout) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def run(self, command, *, timeout=None, output_limit=0) -> ExecResult:  # noqa: ANN001
        raise NotImplementedError

    def exec(self, argv, **kwargs) -> ExecResult:  # noqa: ANN001
        raise NotImplementedError

    def read_file(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    def write_file(self, path: str, data: bytes | str) -> None:
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    def copy_in(self, src: Path, dest: str) -> None:
        shutil.copy(src, self._path(dest))

    def copy_out(self, src: str, dest: Path) -> None:
        shutil.copy(self._path(src), dest)

    def cleanup(self) -> None:
        pass


def make_ctx(tmp_path: Path, tool_config: dict[str, Any] | None = None,
             task_tool_config: dict[str, dict[str, Any]] | None = None
             ) -> tuple[ToolContext, list[tuple[str, Any]]]:
    recorded: list[tuple[str, Any]] = []
    task = TaskSpec(id="test/pdf-task", description="a test task", metrics=[Metric("score")],
                    tool_config=task_tool_config or {})
    sandbox = FolderSandbox(tmp_path / "workspace")
    sandbox.start(WorkspaceLayout())
    ctx = ToolContext(sandbox=sandbox, task=task, run_dir=tmp_path, state={},
                      grade=lambda kind: None,  # type: ignore[arg-type, return-value]
                      record=lambda k, v: recorded.append((k, v)),
                      tool_config=tool_config or {})
    return ctx, recorded

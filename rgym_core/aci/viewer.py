"""The windowed file viewer: ``open``, ``goto``, ``scroll_up``, ``scroll_down``, ``create``.

The viewer shows a window of N lines (100 unless the tool's config sets
``window``) of the current file, with line numbers::

    [File: /home/agent/workspace/train.py (212 lines total)]
    (40 more lines above)
    41:def main():
    ...
    (72 more lines below)

Its state lives in the episode's ``ctx.state``: ``open_file`` (the absolute path
of the current file) and ``window_start`` (the first line shown, 1-based), so
agents can show ``(Open file: ...)`` in their prompts.  All file access goes
through the sandbox API, so the viewer works the same on every backend.
"""

from __future__ import annotations

import posixpath
from typing import Any

from rgym_core.aci.changes import change_diff, lint_selection
from rgym_core.aci.lint import is_python_file, lint_python
from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema

#: Lines shown at once, unless ``tool_config`` sets ``window``.
DEFAULT_WINDOW = 100
#: Lines kept from the previous window when scrolling.
OVERLAP = 2
#: State keys (in ``ToolContext.state``).
OPEN_FILE = "open_file"
WINDOW_START = "window_start"


def working_dir(ctx: ToolContext) -> str:
    """The shell's working directory as the ``bash`` tool last saw it (the workspace
    until the agent changes directory): relative paths of the file and search tools
    start there, as MLGym's tools, which run in that shell."""
    return str(ctx.state.get("working_dir") or ctx.sandbox.workspace)


def resolve_path(ctx: ToolContext, path: str) -> str:
    """An absolute sandbox path: ``path`` itself, or relative to the shell's working
    directory (:func:`working_dir`)."""
    path = path.strip()
    if not path:
        raise ToolError("the path is empty; give a file path relative to the current directory")
    if not posixpath.isabs(path):
        path = posixpath.join(working_dir(ctx), path)
    return posixpath.normpath(path)


def window_size(ctx: ToolContext) -> int:
    """The number of lines a window shows."""
    value = ctx.tool_config.get("window", DEFAULT_WINDOW)
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = DEFAULT_WINDOW
    return max(1, size)


def read_text(ctx: ToolContext, path: str) -> str:
    """The text of a sandbox file, with clear errors for what cannot be shown."""
    try:
        data = ctx.sandbox.read_file(path)
    except FileNotFoundError:
        raise ToolError(f"File {path} not found; `find_file <name>` or `ls` shows what "
                        "exists") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; use `ls {path}` to list it") from None
    except PermissionError:
        raise ToolError(f"Permission denied reading {path}") from None
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path} is a binary file; the viewer shows text files only")
    return data.decode("utf-8", errors="replace")


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` without their line endings (an empty file has none)."""
    return text.splitlines()


def join_lines(lines: list[str]) -> str:
    """The file text for ``lines``, ending with a newline unless empty."""
    return "\n".join(lines) + "\n" if lines else ""


def clamp_start(start: int, total: int, window: int) -> int:
    """The first line of a window that starts near ``start`` and stays in the file."""
    return max(1, min(start, total - window + 1))


def render_window(path: str, lines: list[str], start: int, window: int) -> str:
    """The viewer's text for ``lines`` of ``path`` from line ``start``."""
    total = len(lines)
    start = clamp_start(start, total, window)
    end = min(total, start + window - 1)
    out = [f"[File: {path} ({total} lines total)]"]
    if start > 1:
        out.append(f"({start - 1} more lines above)")
    out.extend(f"{i}:{lines[i - 1]}" for i in range(start, end + 1))
    if end < total:
        out.append(f"({total - end} more lines below)")
    return "\n".join(out)


def start_for_line(line: int, window: int) -> int:
    """The window start that shows ``line`` a sixth of the way down the window."""
    return max(1, line - window // 6)


def show(ctx: ToolContext, path: str, start: int, lines: list[str] | None = None) -> str:
    """Make ``path`` the current file with its window at ``start``, and render it."""
    if lines is None:
        lines = split_lines(read_text(ctx, path))
    window = window_size(ctx)
    start = clamp_start(start, len(lines), window)
    ctx.state[OPEN_FILE] = path
    ctx.state[WINDOW_START] = start
    return render_window(path, lines, start, window)


def current_file(ctx: ToolContext) -> str:
    """The open file, or a :class:`ToolError` asking to open one."""
    path = ctx.state.get(OPEN_FILE)
    if not path:
        raise ToolError("No file is open; use `open <path>` first")
    return str(path)


class OpenTool(Tool):
    """Open a file in the viewer."""

    schema = ToolSchema(
        name="open",
        description="Open a file and show a window of its lines with line numbers; with "
                    "line_number, move the window to show that line.",
        args=[ToolArg("path", "string", "the file to open, relative to the current directory or absolute"),
              ToolArg("line_number", "integer", "a line to show", required=False)],
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = resolve_path(ctx, args["path"])
        lines = split_lines(read_text(ctx, path))
        line = args.get("line_number")
        if line is None:
            return show(ctx, path, 1, lines)
        if line < 1 or (lines and line > len(lines)):
            raise ToolError(f"line_number {line} is outside {path}, which has {len(lines)} lines; "
                            f"give a number from 1 to {max(len(lines), 1)}")
        return show(ctx, path, start_for_line(line, window_size(ctx)), lines)

    def status(self, ctx: ToolContext) -> dict[str, Any]:
        """The open file, for the agent's status block (MLGym's ``(Open file: ...)``)."""
        return {OPEN_FILE: ctx.state.get(OPEN_FILE) or "n/a"}


class GotoTool(Tool):
    """Move the viewer's window to a line."""

    schema = ToolSchema(
        name="goto",
        description="Move the window of the open file to show the given line.",
        args=[ToolArg("line_number", "integer", "the line to show")],
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = current_file(ctx)
        lines = split_lines(read_text(ctx, path))
        line = args["line_number"]
        if line < 1 or line > max(len(lines), 1):
            raise ToolError(f"line_number {line} is outside {path}, which has {len(lines)} lines; "
                            f"give a number from 1 to {max(len(lines), 1)}")
        return show(ctx, path, start_for_line(line, window_size(ctx)), lines)


class _ScrollTool(Tool):
    direction = 1
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = current_file(ctx)
        lines = split_lines(read_text(ctx, path))
        window = window_size(ctx)
        start = clamp_start(int(ctx.state.get(WINDOW_START, 1)), len(lines), window)
        target = clamp_start(start + self.direction * max(1, window - OVERLAP), len(lines), window)
        text = show(ctx, path, target, lines)
        if target == start:
            edge = "end" if self.direction > 0 else "beginning"
            text = f"Already at the {edge} of the file.\n{text}"
        return text


class ScrollDownTool(_ScrollTool):
    """Move the window down by a window's length."""

    schema = ToolSchema(name="scroll_down",
                        description="Move the window of the open file down by one window.")
    direction = 1


class ScrollUpTool(_ScrollTool):
    """Move the window up by a window's length."""

    schema = ToolSchema(name="scroll_up",
                        description="Move the window of the open file up by one window.")
    direction = -1


class CreateTool(Tool):
    """Create a new file and open it."""

    schema = ToolSchema(
        name="create",
        description="Create a new file (empty, or with the given content) and open it. "
                    "A Python file whose content does not parse is not created.",
        args=[ToolArg("path", "string", "the new file, relative to the current directory or absolute"),
              ToolArg("content", "string", "the file's text", required=False)],
        text_form="rest",
        end_marker="end_of_create",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        path = resolve_path(ctx, args["path"])
        try:
            ctx.sandbox.read_file(path)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            raise ToolError(f"{path} is a directory; choose a file name") from None
        else:
            raise ToolError(f"File {path} already exists; use `open {args['path']}` to view it "
                            "and `edit` to change it")
        content = args.get("content") or ""
        lines = split_lines(content)
        if is_python_file(path):
            errors = lint_python(content, path, lint_selection(ctx))
            if errors:
                listing = "\n".join(f"- {e}" for e in errors)
                return ToolResult(output=f"The content of {path} has errors, so the file was NOT "
                                         f"created:\n{listing}\nFix them and run create again.",
                                  error=True, info={"lint_errors": [str(e) for e in errors]})
        try:
            ctx.sandbox.write_file(path, join_lines(lines))
        except PermissionError:
            raise ToolError(f"Permission denied writing {path}") from None
        return ToolResult(output=show(ctx, path, 1, lines),
                          info={"applied": True, "path": path, "diff": change_diff(path, [], lines)})

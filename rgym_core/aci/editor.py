"""The linting editor: ``edit`` (replace a line range) and ``insert`` (after a line).

Both change the file open in the viewer.  A change to a ``.py`` file is linted
first (:mod:`rgym_core.aci.lint`); when it would introduce new errors the file
is left exactly as it was and the observation shows the errors, how the change
would have looked, and the original lines, as MLGym's ``edit_linting.sh`` does.
"""

from __future__ import annotations

from typing import Any

from rgym_core.aci.changes import change_diff, lint_selection
from rgym_core.aci.lint import LintError, is_python_file, lint_python, new_errors
from rgym_core.aci.viewer import (
    current_file,
    join_lines,
    read_text,
    render_window,
    show,
    split_lines,
    start_for_line,
    window_size,
)
from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema

APPLIED = ("File updated. Review the change above: check the indentation and look for "
           "duplicate or missing lines; edit the file again if needed.")


def _rejection(path: str, errors: list[LintError], proposed: list[str], original: list[str],
               changed_from: int, original_span: tuple[int, int], window: int) -> str:
    """The observation for a change the linter rejected."""
    listing = "\n".join(f"- {e}" for e in errors)
    rule = "-" * 49
    start = start_for_line(changed_from, window)
    orig_start = start_for_line(original_span[0], window)
    return "\n".join([
        "Your proposed change introduced new errors, so it was NOT applied; the file is unchanged.",
        "",
        "ERRORS:",
        listing,
        "",
        "This is how the file would have looked with your change:",
        rule,
        render_window(path, proposed, start, window),
        rule,
        "",
        "This is the original code:",
        rule,
        render_window(path, original, orig_start, window),
        rule,
        "Fix the command (line numbers, indentation, missing imports or definitions) and run it "
        "again. Do not repeat the same command: it will fail the same way.",
    ])


def apply_change(ctx: ToolContext, path: str, original: list[str], proposed: list[str],
                 changed_from: int, original_span: tuple[int, int]) -> ToolResult:
    """Lint ``proposed`` against ``original`` and write it unless it adds errors."""
    window = window_size(ctx)
    if is_python_file(path):
        select = lint_selection(ctx)
        before = lint_python(join_lines(original), path, select)
        after = lint_python(join_lines(proposed), path, select)
        fresh = new_errors(before, after)
        if fresh:
            text = _rejection(path, fresh, proposed, original, changed_from, original_span, window)
            return ToolResult(output=text, error=True,
                              info={"applied": False, "lint_errors": [str(e) for e in fresh]})
    try:
        ctx.sandbox.write_file(path, join_lines(proposed))
    except PermissionError:
        raise ToolError(f"Permission denied writing {path}; this file is read-only") from None
    view = show(ctx, path, start_for_line(changed_from, window), proposed)
    return ToolResult(output=f"{view}\n{APPLIED}",
                      info={"applied": True, "path": path, "diff": change_diff(path, original, proposed)})


def _body_lines(text: str | None) -> list[str]:
    return split_lines(text or "")


class EditTool(Tool):
    """Replace a range of lines of the open file."""

    schema = ToolSchema(
        name="edit",
        description="Replace lines start_line to end_line (inclusive) of the open file with the "
                    "replacement text (which may have any number of lines, or none to delete "
                    "them). Indentation matters. Python files are checked; a change that adds "
                    "errors is refused. Text form: `edit 5:7`, then the new lines, then a line "
                    "`end_of_edit`.",
        args=[ToolArg("start_line", "integer", "the first line to replace (1-based)"),
              ToolArg("end_line", "integer", "the last line to replace (inclusive)"),
              ToolArg("replacement", "string", "the new text for these lines")],
        text_form="rest",
        end_marker="end_of_edit",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = current_file(ctx)
        original = split_lines(read_text(ctx, path))
        start, end = args["start_line"], args["end_line"]
        last = max(len(original), 1)
        if start < 1 or end < start:
            raise ToolError(f"edit: invalid range {start}:{end}; start_line must be at least 1 "
                            "and end_line at least start_line")
        if end > last:
            raise ToolError(f"edit: end_line {end} is past the end of {path} ({len(original)} "
                            "lines); use insert to add lines at the end")
        proposed = original[: start - 1] + _body_lines(args["replacement"]) + original[end:]
        return apply_change(ctx, path, original, proposed, start, (start, end))


class InsertTool(Tool):
    """Insert lines after a line of the open file."""

    schema = ToolSchema(
        name="insert",
        description="Insert text after line_number of the open file (0 inserts at the top). "
                    "Indentation matters. Python files are checked; a change that adds errors "
                    "is refused. Text form: `insert 5`, then the new lines, then a line "
                    "`end_of_insert`.",
        args=[ToolArg("line_number", "integer", "the line after which to insert (0 for the top)"),
              ToolArg("text", "string", "the lines to insert")],
        text_form="rest",
        end_marker="end_of_insert",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = current_file(ctx)
        original = split_lines(read_text(ctx, path))
        line = args["line_number"]
        if line < 0 or line > len(original):
            raise ToolError(f"insert: line_number {line} is outside {path}, which has "
                            f"{len(original)} lines; give a number from 0 to {len(original)}")
        added = _body_lines(args["text"])
        if not added:
            raise ToolError("insert: the text to insert is empty")
        proposed = original[:line] + added + original[line:]
        return apply_change(ctx, path, original, proposed, line + 1, (max(line, 1), line))

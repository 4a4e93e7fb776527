"""Search tools: ``search_dir``, ``search_file`` and ``find_file``.

Search terms are literal text unless ``tool_config: {rgym: {search: basic}}`` (grep
basic regular expressions, as MLGym's ``search.sh``) or ``extended`` (``grep -E``) says
otherwise; the ``mlgym`` profiles choose ``basic``.  Results are capped
(:data:`MAX_RESULTS` files or lines): past the cap the tool asks for a narrower
search instead of flooding the context.  Hidden files and folders are skipped
by ``search_dir``.  ``grep`` and ``find`` run through ``Sandbox.exec``, which
every backend provides.
"""

from __future__ import annotations

from typing import Any

from rgym_core.aci.viewer import current_file, read_text, resolve_path, split_lines, working_dir
from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolSchema

#: The most files (``search_dir``, ``find_file``) or lines (``search_file``) listed.
MAX_RESULTS = 100
#: Output limit for the listing commands (their output is parsed, not shown).
_LISTING_LIMIT = 5_000_000
#: ``tool_config: {rgym: {search: MODE}}``: how a search term is read, as grep's flags.
#: ``fixed``: literal text (rgym's default); ``basic``: a grep basic regular expression
#: (MLGym's ``search.sh`` runs plain ``grep``, so do we); ``extended``: ``grep -E``.
SEARCH_MODES = {"fixed": ["-F"], "basic": [], "extended": ["-E"]}
DEFAULT_SEARCH_MODE = "fixed"


def _cap(ctx: ToolContext) -> int:
    try:
        return max(1, int(ctx.tool_config.get("max_results", MAX_RESULTS)))
    except (TypeError, ValueError):
        return MAX_RESULTS


def search_mode(ctx: ToolContext) -> str:
    """The episode's search mode (:data:`SEARCH_MODES`); an unknown one is a ToolError."""
    mode = str(ctx.tool_config.get("search", DEFAULT_SEARCH_MODE)).strip().lower()
    if mode not in SEARCH_MODES:
        raise ToolError(f"tool_config.rgym.search: unknown search mode {mode!r}; choose one of "
                        f"{', '.join(SEARCH_MODES)} (in task.yaml or the profile)")
    return mode


def _grep_failure(tool: str, where: str, result: Any, mode: str) -> ToolError:
    detail = (result.output.strip().splitlines()[-1:] or ["grep failed"])[0]
    if result.timed_out:
        detail = "the search timed out"
    hint = "" if mode == "fixed" else f" (the term is a grep {mode} regular expression)"
    return ToolError(f"{tool}: cannot search {where}: {detail}{hint}")


def _term(args: dict[str, Any]) -> str:
    term = args["search_term"]
    if not term:
        raise ToolError("the search term is empty")
    return term


def _report(ctx: ToolContext, what: str, where: str, rows: list[str], total: int, *,
            unit: str = "files", verb: str = "matched", hint: str = ".",
            end_line: bool = True) -> str:
    """The answer of a search: no matches, too many rows (past the cap), or the rows
    with a header (and an end line)."""
    if not rows:
        return f'No matches found for "{what}" in {where}'
    cap = _cap(ctx)
    if len(rows) > cap:
        return (f'More than {cap} {unit} {verb} "{what}" in {where} ({len(rows)} {unit}). '
                f"Please narrow your search{hint}")
    text = f'Found {total} matches for "{what}" in {where}:\n' + "\n".join(rows)
    return text + (f'\nEnd of matches for "{what}" in {where}' if end_line else "")


class SearchDirTool(Tool):
    """Count the matches of a term in every file under a folder."""

    schema = ToolSchema(
        name="search_dir",
        description="Search for a term in all files under a folder (default: the "
                    "current directory) and list the files with their number of matches.",
        args=[ToolArg("search_term", "string", "the text to find (literal text, or a grep "
                                               "regular expression where the task says so)"),
              ToolArg("dir", "string", "the folder to search", required=False)],
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        term = _term(args)
        mode = search_mode(ctx)
        folder = resolve_path(ctx, args.get("dir") or working_dir(ctx))
        result = ctx.sandbox.exec(
            ["grep", "-rIcH", *SEARCH_MODES[mode], "--exclude=.*", "--exclude-dir=.*", "--", term,
             folder], timeout=ctx.action_timeout_s, output_limit=_LISTING_LIMIT)
        if result.exit_code not in (0, 1) or result.timed_out:
            raise _grep_failure("search_dir", folder, result, mode)
        counts: list[tuple[str, int]] = []
        for line in result.output.splitlines():
            name, _, count = line.rpartition(":")
            if name and count.isdigit() and int(count) > 0:
                counts.append((name, int(count)))
        rows = [f"{name} ({count} matches)" for name, count in sorted(counts)]
        return _report(ctx, term, folder, rows, sum(c for _, c in counts),
                       hint=": use a more specific term or a subfolder.")


class SearchFileTool(Tool):
    """List the lines of a file that contain a term."""

    schema = ToolSchema(
        name="search_file",
        description="Search for a term in a file (default: the open file) and list the "
                    "matching lines with their numbers.",
        args=[ToolArg("search_term", "string", "the text to find (literal text, or a grep "
                                               "regular expression where the task says so)"),
              ToolArg("file", "string", "the file to search", required=False)],
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        term = _term(args)
        path = resolve_path(ctx, args["file"]) if args.get("file") else current_file(ctx)
        lines = split_lines(read_text(ctx, path))
        mode = search_mode(ctx)
        if mode == "fixed":
            numbers = [i for i, text in enumerate(lines, start=1) if term in text]
        else:  # grep itself, so the regular expression means what it means to grep
            result = ctx.sandbox.exec(["grep", "-n", *SEARCH_MODES[mode], "--", term, path],
                                      timeout=ctx.action_timeout_s, output_limit=_LISTING_LIMIT)
            if result.exit_code not in (0, 1) or result.timed_out:
                raise _grep_failure("search_file", path, result, mode)
            numbers = [int(line.partition(":")[0]) for line in result.output.splitlines()
                       if line.partition(":")[0].isdigit()]
        rows = [f"Line {i}:{lines[i - 1]}" for i in numbers if 0 < i <= len(lines)]
        return _report(ctx, term, path, rows, len(rows), unit="lines")


class FindFileTool(Tool):
    """Find files by name (shell wildcards allowed)."""

    schema = ToolSchema(
        name="find_file",
        description="Find files whose name matches a pattern (shell wildcards such as *.py are "
                    "allowed) under a folder (default: the current directory).",
        args=[ToolArg("file_name", "string", "the file name or pattern"),
              ToolArg("dir", "string", "the folder to search", required=False)],
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> str:
        pattern = args["file_name"]
        if not pattern:
            raise ToolError("find_file: the file name is empty")
        folder = resolve_path(ctx, args.get("dir") or working_dir(ctx))
        result = ctx.sandbox.exec(["find", folder, "-type", "f", "-name", pattern],
                                  timeout=ctx.action_timeout_s, output_limit=_LISTING_LIMIT)
        if result.exit_code != 0 or result.timed_out:
            detail = result.output.strip().splitlines()[-1:] or ["find failed"]
            raise ToolError(f"find_file: cannot search {folder}: {detail[0]}")
        found = sorted(line for line in result.output.splitlines() if line)
        return _report(ctx, pattern, folder, found, len(found), verb="named", end_line=False)


def search_tools() -> list[Tool]:
    """The three search tools."""
    return [SearchDirTool(), SearchFileTool(), FindFileTool()]

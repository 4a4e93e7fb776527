"""Text commands: turning a model's reply in MLGym's format into an :class:`Action`.

A reply is a discussion followed by exactly one fenced block holding one command::

    DISCUSSION
    The baseline trains for 3 epochs; let me look at it first.
    ```
    open baseline.py 40
    ```

The first word of the block names a tool when it matches one of the episode's
schemas; anything else is a shell command for the ``bash`` tool.  Arguments are
written as the schema's ``text_form`` says:

* ``"args"``: space-separated, shell-quoted positional arguments
  (``search_dir "def train" src``);
* ``"rest"``: the leading arguments on the command line, then the last argument.
  With an ``end_marker`` the last argument is the block's following lines up to a
  line holding only the marker (``edit 5:7`` ... ``end_of_edit``); a leading
  range ``N:M`` counts as two arguments.  Without one it is the rest of the
  line and any following lines.

:func:`parse_action` raises :class:`CommandFormatError` for a reply that cannot
be run; its message tells the model how to fix it, so agents can send it back
as a re-query.  :func:`render_tool_docs` writes the matching command
documentation for a system prompt.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from rgym_core.records import Action
from rgym_core.tools import ToolError, ToolSchema

#: The tool that runs shell commands; a block not naming another tool goes there.
SHELL_TOOL = "bash"
FENCE = "```"

_EXAMPLE = "DISCUSSION\nFirst I'll list the files in the workspace.\n```\nls -a\n```"
_RANGE = re.compile(r"^(\d+):(\d+)$")


class CommandFormatError(ValueError):
    """A reply that cannot be turned into an action.

    ``kind`` is a short word (``no_command``, ``multiple_commands``,
    ``unclosed_block``, ``empty_command``, ``missing_end_marker``,
    ``bad_arguments``); the message says what was wrong and how to write it.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _opening_name(line: str) -> str:
    words = line.split()
    return words[0] if words else ""


def find_blocks(text: str, tools: Sequence[ToolSchema] = ()) -> tuple[list[str], str]:
    """The bodies of the top-level fenced blocks of ``text``, and the text outside them.

    A fence line starts with three backticks (an info string such as ``bash`` is
    ignored); a block closes at a line holding only the backticks.  Inside a
    block for a tool with an ``end_marker``, fences before the marker belong to
    the body (editing a Markdown file with code blocks works).
    """
    markers = {s.name: s.end_marker for s in tools if s.end_marker}
    lines = text.splitlines()
    blocks: list[str] = []
    outside: list[str] = []
    body: list[str] | None = None
    waiting_for: str | None = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if body is None:
            if stripped.startswith(FENCE):
                body = []
                waiting_for = None
            else:
                outside.append(line)
            continue
        if not body and waiting_for is None:
            waiting_for = markers.get(_opening_name(line))
        if waiting_for and stripped == waiting_for:
            waiting_for = ""  # the marker was seen: the next fence closes the block
        if stripped == FENCE and not (
                waiting_for and any(rest.strip() == waiting_for for rest in lines[index + 1:])):
            blocks.append("\n".join(body))
            body = None
            continue
        body.append(line)
    if body is not None:
        raise CommandFormatError(
            "Your command block is not closed: end it with a line holding only ``` "
            f"(three backticks). The expected format is:\n{_EXAMPLE}", "unclosed_block")
    return blocks, "\n".join(outside)


def _leading_tokens(line: str, count: int) -> tuple[list[str], str]:
    """``count`` arguments from the start of ``line`` (shell-quoted words; a range
    ``N:M`` counts as two) and the unparsed rest of the line."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens: list[str] = []
    while len(tokens) < count:
        token = lexer.get_token()
        if token is None or token == lexer.eof:
            break
        tokens.extend(_expand_ranges([token]))
    rest: str = lexer.instream.read()  # type: ignore[call-arg]  # a StringIO reads all
    return tokens, rest.strip()


def _expand_ranges(tokens: list[str]) -> list[str]:
    out: list[str] = []
    for token in tokens:
        m = _RANGE.match(token)
        out.extend([m.group(1), m.group(2)] if m else [token])
    return out


def _bad(schema: ToolSchema, why: str) -> CommandFormatError:
    return CommandFormatError(f"{why}. Usage:\n{_usage(schema)}", "bad_arguments")


def _unquote(text: str) -> str:
    """``"a b"`` -> ``a b`` when the whole text is one quoted string, else unchanged."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            parts = shlex.split(text)
        except ValueError:
            return text
        if len(parts) == 1:
            return parts[0]
    return text


def _parse_rest(schema: ToolSchema, first: str, following: list[str]) -> dict[str, Any]:
    leading = schema.args[:-1]
    last = schema.args[-1]
    try:
        tokens, rest = _leading_tokens(first, len(leading))
    except ValueError as exc:
        raise _bad(schema, f"{schema.name}: cannot read the arguments ({exc}); check the quotes"
                   ) from None
    if len(tokens) > len(leading):
        raise _bad(schema, f"{schema.name}: too many arguments on the command line")
    values: dict[str, Any] = dict(zip((a.name for a in leading), tokens, strict=False))
    if schema.end_marker:
        if rest:
            raise _bad(schema, f"{schema.name}: unexpected text '{rest}' on the command line")
        if not following:
            return values  # no body: only valid when the last argument is optional
        if schema.end_marker not in (line.strip() for line in following):
            raise CommandFormatError(
                f"The {schema.name} command must end with a line holding only "
                f"'{schema.end_marker}'. Usage:\n{_usage(schema)}", "missing_end_marker")
        end = next(i for i, line in enumerate(following) if line.strip() == schema.end_marker)
        if any(line.strip() for line in following[end + 1:]):
            raise CommandFormatError(
                f"Text follows '{schema.end_marker}'. Put only ONE command in the block and send "
                "the next one after you see the result.", "bad_arguments")
        values[last.name] = "\n".join(following[:end])
        return values
    if not following:
        if rest:
            values[last.name] = _unquote(rest)
        return values
    values[last.name] = "\n".join([rest, *following] if rest else following)
    return values


def _parse_args(schema: ToolSchema, block: str) -> dict[str, Any]:
    if "\n" in block.strip():
        raise _bad(schema, f"{schema.name} takes its arguments on one line; for several "
                           "commands, send them one at a time")
    try:
        tokens = _expand_ranges(shlex.split(block))[1:]
    except ValueError as exc:
        raise _bad(schema, f"{schema.name}: cannot read the arguments ({exc}); check the quotes"
                   ) from None
    if len(tokens) > len(schema.args):
        if not schema.args:
            raise _bad(schema, f"{schema.name} takes no arguments, got {' '.join(tokens)!r}")
        raise _bad(schema, f"{schema.name} takes at most {len(schema.args)} argument(s), got "
                           f"{len(tokens)}; quote an argument that contains spaces")
    return dict(zip((a.name for a in schema.args), tokens, strict=False))


def parse_command(block: str, tools: Sequence[ToolSchema]) -> tuple[str, dict[str, Any]]:
    """The tool name and arguments for the body of one command block."""
    lines = block.strip("\n").splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines or not "\n".join(lines).strip():
        raise CommandFormatError(f"Your command block is empty. Write one command in it:\n{_EXAMPLE}",
                                 "empty_command")
    by_name = {s.name: s for s in tools}
    name = _opening_name(lines[0])
    schema = by_name.get(name)
    if schema is None or name == SHELL_TOOL:
        return SHELL_TOOL, {"command": "\n".join(lines).strip()}
    after_name = lines[0].strip()[len(name):]
    if schema.text_form == "rest" and schema.args:
        given = _parse_rest(schema, after_name, lines[1:])
    else:
        given = _parse_args(schema, "\n".join(lines).strip())
    try:
        bound = schema.bind(given)
    except ToolError as exc:
        message = str(exc)
        if "usage:" not in message:
            message += f"; usage:\n{_usage(schema)}"
        raise CommandFormatError(message, "bad_arguments") from None
    return name, {k: v for k, v in bound.items() if k in given}


def parse_action(text: str, tools: Sequence[ToolSchema]) -> Action:
    """Parse a model reply (discussion plus one fenced command) into an :class:`Action`.

    ``thought`` is the text outside the block and ``raw`` the whole reply.
    Raises :class:`CommandFormatError` when the reply has no block, more than
    one, an unclosed block, a missing end marker or bad arguments.
    """
    blocks, outside = find_blocks(text, tools)
    if not blocks:
        raise CommandFormatError(
            "Your reply has no command. Write your reasoning, then exactly one command in a "
            f"fenced block, like this:\n{_EXAMPLE}", "no_command")
    if len(blocks) > 1:
        raise CommandFormatError(
            f"Your reply has {len(blocks)} command blocks; it must have exactly one. Send one "
            "command, wait for its output, then send the next.", "multiple_commands")
    tool, args = parse_command(blocks[0], tools)
    return Action(tool=tool, args=args, thought=outside.strip() or None, raw=text)


def _usage(schema: ToolSchema) -> str:
    """How to write ``schema``'s command in a block."""
    if schema.name == SHELL_TOOL:
        return "<any shell command>"
    if schema.text_form == "rest" and schema.end_marker and schema.args:
        leading = schema.args[:-1]
        if len(leading) == 2 and all(a.type == "integer" for a in leading):
            head = f"{schema.name} <{leading[0].name}>:<{leading[1].name}>"
        else:
            head = " ".join([schema.name, *(_arg_usage(a) for a in leading)])
        return f"{head}\n<{schema.args[-1].name}>\n{schema.end_marker}"
    return " ".join([schema.name, *(_arg_usage(a) for a in schema.args)])


def _arg_usage(arg: Any) -> str:
    return f"<{arg.name}>" if arg.required else f"[<{arg.name}>]"


def render_tool_docs(tools: Sequence[ToolSchema]) -> str:
    """Documentation of the text commands for a system prompt: each command's
    usage, description and arguments.  The shell tool is described as "any other
    text is a shell command"."""
    sections: list[str] = []
    for schema in tools:
        if schema.name == SHELL_TOOL:
            continue
        lines = [_usage(schema), f"  {schema.description}"]
        for arg in schema.args:
            optional = "" if arg.required else ", optional"
            lines.append(f"  - {arg.name} ({arg.type}{optional}): {arg.description}")
        sections.append("\n".join(lines))
    if any(s.name == SHELL_TOOL for s in tools):
        sections.append("Any other command is run in the workspace's bash shell (cwd and "
                        "exported variables persist between commands); interactive programs "
                        "(vim, a bare python) are not available.")
    return "\n\n".join(sections)

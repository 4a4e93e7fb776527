"""The text-command parser (MLGym's discussion + one fenced command) and tool docs."""

from __future__ import annotations

import pytest

from rgym_core.aci import builtin_tools
from rgym_core.aci.commands import CommandFormatError, parse_action, render_tool_docs
from rgym_core.tools import ToolArg, ToolSchema

NOTE = ToolSchema(name="memory_write", description="store a note",
                  args=[ToolArg("tag", "string", "a tag"), ToolArg("content", "string", "the note")],
                  text_form="rest")
SCHEMAS = [t.schema for t in builtin_tools()] + [NOTE]


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_action(text, SCHEMAS)


def fails(text: str, kind: str) -> str:
    with pytest.raises(CommandFormatError) as info:
        parse(text)
    assert info.value.kind == kind
    return str(info.value)


def test_discussion_and_a_shell_command() -> None:
    reply = "DISCUSSION\nLet me look around first.\n```\nls -a\n```\n"
    action = parse(reply)
    assert (action.tool, action.args) == ("bash", {"command": "ls -a"})
    assert action.thought == "DISCUSSION\nLet me look around first."
    assert action.raw == reply


def test_a_language_tag_on_the_fence_is_ignored_and_bash_keeps_its_name() -> None:
    action = parse("```bash\nbash run.sh --fast\n```")
    assert action.args == {"command": "bash run.sh --fast"} and action.thought is None


def test_multi_line_shell_commands_stay_whole() -> None:
    action = parse("```\nfor f in *.py; do\n  wc -l $f\ndone\n```")
    assert action.args["command"] == "for f in *.py; do\n  wc -l $f\ndone"


def test_a_word_that_is_not_a_tool_is_a_shell_command() -> None:
    assert parse("```\nopener x\n```").args == {"command": "opener x"}
    assert parse("```\npython train.py --epochs 3\n```").tool == "bash"


def test_positional_arguments_are_shell_quoted_and_typed() -> None:
    action = parse('```\nopen "my dir/train.py" 40\n```')
    assert (action.tool, action.args) == ("open", {"path": "my dir/train.py", "line_number": 40})
    assert parse("```\nopen train.py\n```").args == {"path": "train.py"}
    action = parse("```\nsearch_dir 'def train' src\n```")
    assert action.args == {"search_term": "def train", "dir": "src"}
    assert parse("```\nsubmit\n```").args == {}


def test_edit_with_a_range_and_a_body() -> None:
    action = parse("I fix the loop.\n```\nedit 12:14\n    for x in xs:\n        total += x\n"
                   "end_of_edit\n```")
    assert action.tool == "edit"
    assert action.args == {"start_line": 12, "end_line": 14,
                           "replacement": "    for x in xs:\n        total += x"}
    assert parse("```\nedit 3 4\nx = 1\nend_of_edit\n```").args["start_line"] == 3


def test_an_empty_body_deletes_lines() -> None:
    assert parse("```\nedit 2:3\nend_of_edit\n```").args["replacement"] == ""


def test_fences_inside_an_edit_body_belong_to_the_body() -> None:
    action = parse("```\nedit 1:1\n# Usage\n```bash\nrgym run\n```\nend_of_edit\n```\n")
    assert action.args["replacement"] == "# Usage\n```bash\nrgym run\n```"


def test_insert_and_create_forms() -> None:
    action = parse("```\ninsert 0\nimport os\nend_of_insert\n```")
    assert action.args == {"line_number": 0, "text": "import os"}
    assert parse("```\ncreate notes.txt\n```").args == {"path": "notes.txt"}
    action = parse("```\ncreate a.py\nprint(1)\nend_of_create\n```")
    assert action.args == {"path": "a.py", "content": "print(1)"}


def test_rest_form_without_marker_takes_the_rest_of_the_line_or_block() -> None:
    assert parse("```\nmemory_write lr best lr was 3e-4\n```").args == {
        "tag": "lr", "content": "best lr was 3e-4"}
    assert parse('```\nmemory_write lr "quoted note"\n```').args["content"] == "quoted note"
    assert parse("```\nmemory_write lr first\nsecond\n```").args["content"] == "first\nsecond"


def test_no_block() -> None:
    message = fails("I think I should run ls.", "no_command")
    assert "```" in message and "exactly one command" in message


def test_two_blocks() -> None:
    message = fails("```\nls\n```\nthen\n```\npwd\n```", "multiple_commands")
    assert "2 command blocks" in message and "exactly one" in message


def test_unclosed_block() -> None:
    assert "not closed" in fails("```\nls -a\n", "unclosed_block")


def test_empty_block() -> None:
    fails("```\n\n```", "empty_command")


def test_missing_end_marker() -> None:
    message = fails("```\nedit 1:2\nx = 1\n```", "missing_end_marker")
    assert "end_of_edit" in message and "edit <start_line>:<end_line>" in message


def test_text_after_the_end_marker() -> None:
    assert "ONE command" in fails("```\nedit 1:1\nx\nend_of_edit\nls\n```", "bad_arguments")


@pytest.mark.parametrize(("reply", "expected"), [
    ("```\ngoto\n```", "missing argument 'line_number'"),
    ("```\ngoto ten\n```", "must be integer"),
    ("```\nopen a.py 3 4\n```", "at most 2 argument"),
    ("```\nvalidate now\n```", "takes no arguments"),
    ("```\nopen 'a.py\n```", "check the quotes"),
    ("```\nedit 1:x\ny\nend_of_edit\n```", "must be integer"),
    ("```\nedit 1:2 extra\ny\nend_of_edit\n```", "unexpected text 'extra'"),
    ("```\ninsert 1:2\ny\nend_of_insert\n```", "too many arguments"),
    ("```\nopen a.py\nopen b.py\n```", "one line"),
])
def test_bad_arguments(reply: str, expected: str) -> None:
    message = fails(reply, "bad_arguments")
    assert expected in message
    assert "sage" in message  # every message shows how to write the command


def test_render_tool_docs_lists_every_command_and_the_shell() -> None:
    docs = render_tool_docs(SCHEMAS)
    for schema in SCHEMAS:
        if schema.name != "bash":
            assert f"\n{schema.name}" in f"\n{docs}"
    assert "open <path> [<line_number>]" in docs
    assert "edit <start_line>:<end_line>\n<replacement>\nend_of_edit" in docs
    assert "- line_number (integer, optional)" in docs
    assert "bash shell" in docs


def test_documented_usages_parse_back() -> None:
    """Every usage line the docs show is accepted by the parser."""
    samples = {"open": "open a.py 3", "goto": "goto 3", "scroll_up": "scroll_up",
               "create": "create x.txt", "edit": "edit 1:2\nx\nend_of_edit",
               "insert": "insert 1\nx\nend_of_insert", "search_dir": "search_dir foo",
               "search_file": "search_file foo a.py", "find_file": "find_file '*.py'",
               "validate": "validate", "submit": "submit", "memory_write": "memory_write t c"}
    for name, command in samples.items():
        assert parse(f"```\n{command}\n```").tool == name

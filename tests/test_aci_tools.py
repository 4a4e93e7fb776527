"""The file viewer, linting editor and search tools, run against a real sandbox."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from rgym_core.aci import builtin_tools
from rgym_core.aci.commands import parse_action
from rgym_core.aci.lint import LintError, lint_python, new_errors
from rgym_core.sandbox import ExecResult, Sandbox, SandboxConfig, WorkspaceLayout
from rgym_core.specs import Metric, TaskSpec
from rgym_core.tools import ToolContext, ToolError, ToolResult


class _FolderSandbox(Sandbox):
    """A stand-in used only while ``rgym_core.sandboxes.local`` is not there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = str(root)

    def _host(self, path: str) -> Path:
        return Path(path if path.startswith("/") else f"{self.workspace}/{path}")

    def start(self, layout: WorkspaceLayout) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = 32_000) -> ExecResult:
        return self.exec(["bash", "-c", command], timeout=timeout, output_limit=output_limit)

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = 32_000) -> ExecResult:
        done = subprocess.run(argv, cwd=cwd or self.workspace, capture_output=True, text=True,
                              timeout=timeout, input=input)
        return ExecResult(done.returncode, done.stdout + done.stderr)

    def read_file(self, path: str) -> bytes:
        return self._host(path).read_bytes()

    def write_file(self, path: str, data: bytes | str) -> None:
        host = self._host(path)
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data.encode() if isinstance(data, str) else data)

    def copy_in(self, src: Path, dest: str) -> None:
        shutil.copy(src, self._host(dest))

    def copy_out(self, src: str, dest: Path) -> None:
        shutil.copy(self._host(src), dest)

    def cleanup(self) -> None:
        pass


def make_sandbox(tmp_path: Path) -> Sandbox:
    """The real local sandbox when it is installed, else the folder stand-in."""
    try:
        from rgym_core.sandboxes.local import LocalSandbox
    except ImportError:
        sandbox: Sandbox = _FolderSandbox(tmp_path / "workspace")
    else:
        sandbox = LocalSandbox(SandboxConfig(run_id="aci-test"))  # temp: the agent user can enter it
    sandbox.start(WorkspaceLayout())
    return sandbox


TOOLS = {t.name: t for t in builtin_tools()}
SCHEMAS = [t.schema for t in TOOLS.values()]


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[ToolContext]:
    sandbox = make_sandbox(tmp_path)
    task = TaskSpec(id="test/aci", description="d", metrics=[Metric("accuracy")])
    try:
        yield ToolContext(sandbox=sandbox, task=task, run_dir=tmp_path, state={},
                          grade=lambda kind: None, record=lambda k, v: None,  # type: ignore[arg-type,return-value]
                          action_timeout_s=60)
    finally:
        sandbox.cleanup()


def call(ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    tool = TOOLS[name]
    out = tool.call(tool.schema.bind(args), ctx)
    return out if isinstance(out, ToolResult) else ToolResult(output=out)


def run_text(ctx: ToolContext, reply: str) -> ToolResult:
    action = parse_action(reply, SCHEMAS)
    return call(ctx, action.tool, **action.args)


def write(ctx: ToolContext, path: str, text: str) -> None:
    ctx.sandbox.write_file(path, text)


def read(ctx: ToolContext, path: str) -> str:
    return ctx.sandbox.read_file(path).decode()


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def shown(output: str) -> list[int]:
    """The line numbers a viewer window shows."""
    return [int(line.split(":", 1)[0]) for line in output.splitlines()
            if line.split(":", 1)[0].isdigit()]


# -- registration --------------------------------------------------------------


def test_builtin_tools_have_unique_names_and_are_default() -> None:
    names = [t.name for t in builtin_tools()]
    assert len(names) == len(set(names))
    assert {"open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert",
            "search_dir", "search_file", "find_file", "bash", "validate", "submit"} <= set(names)
    core = [t for t in builtin_tools() if t.namespace != "jobs"]
    assert all(t.default and t.namespace == "rgym" for t in core)
    # The experiment-job tools are built in but asked for (--tool jobs).
    jobs = [t for t in builtin_tools() if t.namespace == "jobs"]
    assert sorted(t.name for t in jobs) == ["job_list", "job_log", "job_start", "job_stop",
                                            "job_wait"]
    assert not any(t.default for t in jobs)


# -- viewer --------------------------------------------------------------------


def test_open_shows_the_first_window_with_header_and_counts(ctx: ToolContext) -> None:
    write(ctx, "big.txt", numbered(250))
    out = call(ctx, "open", path="big.txt").output
    path = f"{ctx.sandbox.workspace}/big.txt"
    assert out.splitlines()[0] == f"[File: {path} (250 lines total)]"
    assert shown(out) == list(range(1, 101))
    assert "1:line 1" in out.splitlines()
    assert "more lines above" not in out
    assert out.splitlines()[-1] == "(150 more lines below)"
    assert ctx.state["open_file"] == path and ctx.state["window_start"] == 1
    assert TOOLS["open"].status(ctx) == {"open_file": path}


def test_open_at_a_line_puts_it_a_sixth_down_and_clamps_at_the_end(ctx: ToolContext) -> None:
    write(ctx, "big.txt", numbered(250))
    out = call(ctx, "open", path="big.txt", line_number=150).output
    assert shown(out) == list(range(134, 234))
    assert "(133 more lines above)" in out and "(17 more lines below)" in out
    out = call(ctx, "open", path="big.txt", line_number=245).output
    assert shown(out) == list(range(151, 251))
    assert "more lines below" not in out


def test_open_accepts_absolute_paths_and_reports_missing_files(ctx: ToolContext) -> None:
    write(ctx, "sub/a.py", "x = 1\n")
    absolute = f"{ctx.sandbox.workspace}/sub/a.py"
    assert "1:x = 1" in call(ctx, "open", path=absolute).output
    with pytest.raises(ToolError, match="not found"):
        call(ctx, "open", path="nope.py")
    with pytest.raises(ToolError, match="is a directory"):
        call(ctx, "open", path="sub")
    with pytest.raises(ToolError, match="outside"):
        call(ctx, "open", path="sub/a.py", line_number=5)


def test_goto_and_scrolling_move_the_window(ctx: ToolContext) -> None:
    write(ctx, "big.txt", numbered(250))
    assert TOOLS["open"].status(ctx) == {"open_file": "n/a"}
    with pytest.raises(ToolError, match="No file is open"):
        call(ctx, "goto", line_number=3)
    call(ctx, "open", path="big.txt")
    assert shown(call(ctx, "goto", line_number=120).output)[0] == 104
    with pytest.raises(ToolError, match="outside"):
        call(ctx, "goto", line_number=251)
    call(ctx, "goto", line_number=1)
    assert shown(call(ctx, "scroll_down").output)[0] == 99
    assert shown(call(ctx, "scroll_down").output)[0] == 151  # clamped to the last window
    out = call(ctx, "scroll_down").output
    assert out.startswith("Already at the end") and shown(out)[0] == 151
    assert shown(call(ctx, "scroll_up").output)[0] == 53
    assert shown(call(ctx, "scroll_up").output)[0] == 1
    assert call(ctx, "scroll_up").output.startswith("Already at the beginning")


def test_window_size_comes_from_the_tool_config(ctx: ToolContext) -> None:
    ctx.tool_config = {"window": 10}
    write(ctx, "f.txt", numbered(30))
    out = call(ctx, "open", path="f.txt").output
    assert shown(out) == list(range(1, 11)) and "(20 more lines below)" in out
    assert shown(call(ctx, "scroll_down").output) == list(range(9, 19))


def test_viewer_rereads_a_file_changed_by_the_shell(ctx: ToolContext) -> None:
    write(ctx, "f.txt", numbered(3))
    call(ctx, "open", path="f.txt")
    ctx.sandbox.run("echo 'line 4' >> f.txt")
    out = call(ctx, "goto", line_number=4).output
    assert "(4 lines total)" in out and "4:line 4" in out


def test_binary_files_are_refused(ctx: ToolContext) -> None:
    ctx.sandbox.write_file("blob.bin", b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        call(ctx, "open", path="blob.bin")


# -- create --------------------------------------------------------------------


def test_create_makes_and_opens_a_file_and_refuses_to_overwrite(ctx: ToolContext) -> None:
    out = call(ctx, "create", path="new/notes.txt").output
    assert read(ctx, "new/notes.txt") == ""
    assert "(0 lines total)" in out
    assert ctx.state["open_file"].endswith("/new/notes.txt")
    out = run_text(ctx, "```\ncreate train.py\nimport os\nprint(os.getcwd())\nend_of_create\n```").output
    assert read(ctx, "train.py") == "import os\nprint(os.getcwd())\n"
    assert "2:print(os.getcwd())" in out
    with pytest.raises(ToolError, match="already exists"):
        call(ctx, "create", path="train.py", content="x = 1\n")
    assert read(ctx, "train.py") == "import os\nprint(os.getcwd())\n"


def test_create_refuses_python_that_does_not_parse(ctx: ToolContext) -> None:
    res = call(ctx, "create", path="bad.py", content="def f(:\n    pass\n")
    assert res.error and "NOT created" in res.output and "SyntaxError" in res.output
    with pytest.raises(FileNotFoundError):
        ctx.sandbox.read_file("bad.py")


# -- edit and insert -----------------------------------------------------------

SCRIPT = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\nprint(area(2))\n"


def test_edit_replaces_a_line_range_and_shows_the_result(ctx: ToolContext) -> None:
    write(ctx, "s.py", SCRIPT)
    call(ctx, "open", path="s.py")
    res = run_text(ctx, "Use tau.\n```\nedit 5:5\n    return math.tau * r * r / 2\nend_of_edit\n```")
    assert not res.error and res.info["applied"] is True
    assert read(ctx, "s.py") == SCRIPT.replace("math.pi * r * r", "math.tau * r * r / 2")
    assert "5:    return math.tau * r * r / 2" in res.output
    assert "File updated" in res.output


def test_edit_can_grow_shrink_and_delete(ctx: ToolContext) -> None:
    write(ctx, "t.txt", numbered(5))
    call(ctx, "open", path="t.txt")
    call(ctx, "edit", start_line=2, end_line=3, replacement="a\nb\nc")
    assert read(ctx, "t.txt") == "line 1\na\nb\nc\nline 4\nline 5\n"
    call(ctx, "edit", start_line=2, end_line=4, replacement="")
    assert read(ctx, "t.txt") == "line 1\nline 4\nline 5\n"


def test_edit_that_adds_an_undefined_name_is_rejected_and_the_file_kept(ctx: ToolContext) -> None:
    write(ctx, "s.py", SCRIPT)
    call(ctx, "open", path="s.py")
    res = call(ctx, "edit", start_line=5, end_line=5, replacement="    return numpy.pi * r * r")
    assert res.error and res.info["applied"] is False
    assert read(ctx, "s.py") == SCRIPT
    assert "line 5: undefined name 'numpy'" in res.output
    would, original = res.output.split("This is the original code:")
    assert "5:    return numpy.pi * r * r" in would
    assert "5:    return math.pi * r * r" in original
    assert "NOT applied" in res.output


def test_edit_with_an_indentation_error_is_rejected(ctx: ToolContext) -> None:
    write(ctx, "s.py", SCRIPT)
    call(ctx, "open", path="s.py")
    res = call(ctx, "edit", start_line=5, end_line=5, replacement="      return 1\n    return 2")
    assert res.error and "IndentationError" in res.output
    assert read(ctx, "s.py") == SCRIPT


def test_errors_that_were_already_there_do_not_block_an_edit(ctx: ToolContext) -> None:
    write(ctx, "old.py", "print(undefined_thing)\nx = 1\n")
    call(ctx, "open", path="old.py")
    res = call(ctx, "insert", line_number=0, text="# a comment\n# another")
    assert not res.error
    assert read(ctx, "old.py") == "# a comment\n# another\nprint(undefined_thing)\nx = 1\n"
    res = call(ctx, "edit", start_line=4, end_line=4, replacement="y = undefined_thing")
    assert res.error and "undefined name 'undefined_thing'" in res.output


def test_non_python_files_are_not_linted(ctx: ToolContext) -> None:
    write(ctx, "notes.md", "# title\n")
    call(ctx, "open", path="notes.md")
    res = run_text(ctx, "```\nedit 1:1\n```python\ndef broken(:\n```\nend_of_edit\n```")
    assert not res.error
    assert read(ctx, "notes.md") == "```python\ndef broken(:\n```\n"


def test_edit_ranges_are_checked(ctx: ToolContext) -> None:
    write(ctx, "t.txt", numbered(3))
    with pytest.raises(ToolError, match="No file is open"):
        call(ctx, "edit", start_line=1, end_line=1, replacement="x")
    call(ctx, "open", path="t.txt")
    with pytest.raises(ToolError, match="invalid range 3:2"):
        call(ctx, "edit", start_line=3, end_line=2, replacement="x")
    with pytest.raises(ToolError, match="past the end"):
        call(ctx, "edit", start_line=2, end_line=4, replacement="x")
    assert read(ctx, "t.txt") == numbered(3)


def test_edit_fills_an_empty_file(ctx: ToolContext) -> None:
    call(ctx, "create", path="empty.py")
    res = call(ctx, "edit", start_line=1, end_line=1, replacement="import sys\nprint(sys.argv)")
    assert not res.error and read(ctx, "empty.py") == "import sys\nprint(sys.argv)\n"


def test_insert_adds_lines_after_a_line(ctx: ToolContext) -> None:
    write(ctx, "s.py", SCRIPT)
    call(ctx, "open", path="s.py")
    res = run_text(ctx, "```\ninsert 8\nprint(area(3))\nend_of_insert\n```")
    assert not res.error
    assert read(ctx, "s.py") == SCRIPT + "print(area(3))\n"
    assert "9:print(area(3))" in res.output
    res = call(ctx, "insert", line_number=1, text="print(np.zeros(3))")
    assert res.error and "undefined name 'np'" in res.output
    assert read(ctx, "s.py") == SCRIPT + "print(area(3))\n"
    with pytest.raises(ToolError, match="from 0 to 9"):
        call(ctx, "insert", line_number=10, text="x = 1")


def test_edits_of_a_read_only_file_are_refused(ctx: ToolContext, tmp_path: Path) -> None:
    write(ctx, "ro.txt", "a\n")
    ctx.sandbox.exec(["chmod", "a-w", f"{ctx.sandbox.workspace}/ro.txt"])
    if ctx.sandbox.exec(["sh", "-c", f"test -w {ctx.sandbox.workspace}/ro.txt"]).exit_code == 0:
        pytest.skip("the sandbox user can write read-only files (running as root without a drop)")
    call(ctx, "open", path="ro.txt")
    with pytest.raises(ToolError, match="Permission denied"):
        call(ctx, "edit", start_line=1, end_line=1, replacement="b")


# -- lint ----------------------------------------------------------------------


def test_lint_reports_syntax_and_undefined_names_only() -> None:
    assert lint_python("import os\nx = 1  # unused import is fine\n") == []
    assert lint_python("def f(:\n")[0].message.startswith("SyntaxError")
    assert "duplicate argument" in lint_python("def f(a, a):\n    pass\n")[0].message
    names = [e.message for e in lint_python("def f():\n    return b\n__all__ = ['g']\n")]
    assert names == ["undefined name 'b'", "undefined name 'g' in __all__"]


def test_new_errors_ignores_moved_errors_and_counts_repeats() -> None:
    before = [LintError(1, "undefined name 'x'")]
    after = [LintError(3, "undefined name 'x'"), LintError(4, "undefined name 'x'")]
    assert new_errors(before, after) == [LintError(4, "undefined name 'x'")]


# -- search --------------------------------------------------------------------


def test_search_dir_counts_matches_per_file_and_skips_hidden(ctx: ToolContext) -> None:
    write(ctx, "a.py", "def train():\n    train_loop()\n")
    write(ctx, "src/b.py", "# train here\n")
    write(ctx, "src/c.txt", "nothing\n")
    write(ctx, ".hidden/d.py", "train\n")
    ws = ctx.sandbox.workspace
    out = call(ctx, "search_dir", search_term="train").output
    assert out.splitlines() == [f'Found 3 matches for "train" in {ws}:',
                                f"{ws}/a.py (2 matches)", f"{ws}/src/b.py (1 matches)",
                                f'End of matches for "train" in {ws}']
    out = call(ctx, "search_dir", search_term="train", dir="src").output
    assert f"{ws}/src/b.py (1 matches)" in out and "a.py" not in out
    assert call(ctx, "search_dir", search_term="train(").output.startswith("Found 1 matches")
    assert call(ctx, "search_dir", search_term="zebra").output.startswith("No matches found")
    with pytest.raises(ToolError, match="cannot search"):
        call(ctx, "search_dir", search_term="x", dir="missing")
    assert call(ctx, "search_dir", search_term="train", dir="a.py").output.startswith(
        "Found 2 matches")


def test_search_dir_and_find_file_cap_their_results(ctx: ToolContext) -> None:
    for i in range(5):
        write(ctx, f"m{i}.py", "needle\n")
    ctx.tool_config = {"max_results": 4}
    out = call(ctx, "search_dir", search_term="needle").output
    assert "More than 4 files" in out and "narrow your search" in out and "m0.py" not in out
    out = call(ctx, "find_file", file_name="m*.py").output
    assert "More than 4 files" in out and "narrow" in out
    ctx.tool_config = {}
    out = call(ctx, "find_file", file_name="m*.py").output
    assert out.startswith('Found 5 matches for "m*.py"') and out.count(".py\n") + 1 >= 5


def test_find_file_finds_by_pattern(ctx: ToolContext) -> None:
    write(ctx, "pkg/model.py", "")
    write(ctx, "pkg/data/model.py", "")
    write(ctx, "pkg/other.txt", "")
    ws = ctx.sandbox.workspace
    out = call(ctx, "find_file", file_name="model.py", dir="pkg").output
    assert out.splitlines()[1:] == [f"{ws}/pkg/data/model.py", f"{ws}/pkg/model.py"]
    assert call(ctx, "find_file", file_name="*.csv").output.startswith("No matches found")
    with pytest.raises(ToolError, match="cannot search"):
        call(ctx, "find_file", file_name="x", dir="nowhere")


def test_search_file_lists_lines_of_the_open_or_given_file(ctx: ToolContext) -> None:
    write(ctx, "s.py", SCRIPT)
    with pytest.raises(ToolError, match="No file is open"):
        call(ctx, "search_file", search_term="area")
    ws = ctx.sandbox.workspace
    out = call(ctx, "search_file", search_term="area", file="s.py").output
    assert out.splitlines() == [f'Found 2 matches for "area" in {ws}/s.py:',
                                "Line 4:def area(r):", "Line 8:print(area(2))",
                                f'End of matches for "area" in {ws}/s.py']
    call(ctx, "open", path="s.py")
    assert "Line 1:import math" in call(ctx, "search_file", search_term="import").output
    ctx.tool_config = {"max_results": 1}
    assert "More than 1 lines" in call(ctx, "search_file", search_term="area").output

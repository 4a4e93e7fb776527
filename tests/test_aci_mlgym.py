"""MLGym's ACI settings, each chosen by ``tool_config`` (the ``mlgym`` profiles set them):
the 1000-line window, grep regular-expression search, flake8's E111/E902 selection, the
working directory in the status block, and the training-command timeout rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.aci import builtin_tools
from rgym_core.aci.lint import MLGYM_SELECT, indentation_errors, lint_python, select_codes
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox
from rgym_core.serialization import SpecError
from rgym_core.specs import Budget, Metric, TaskSpec
from rgym_core.tools import ToolContext, ToolError, ToolResult

TOOLS = {t.name: t for t in builtin_tools()}


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[ToolContext]:
    sandbox = LocalSandbox(SandboxConfig(run_id="aci-mlgym"))
    sandbox.start(WorkspaceLayout())
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


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# -- window ----------------------------------------------------------------------


def test_window_is_100_lines_by_default_and_1000_with_mlgym_config(ctx: ToolContext) -> None:
    ctx.sandbox.write_file("big.txt", numbered(1500))
    out = call(ctx, "open", path="big.txt").output
    assert "100:line 100" in out and "101:line 101" not in out and "(1400 more lines below)" in out
    ctx.tool_config = {"window": 1000}
    out = call(ctx, "open", path="big.txt").output
    assert "1000:line 1000" in out and "1001:line 1001" not in out and "(500 more lines below)" in out
    out = call(ctx, "scroll_down").output  # MLGym: WINDOW - OVERLAP(2) further, clamped to the end
    assert "(500 more lines above)" in out and "1500:line 1500" in out
    out = call(ctx, "goto", line_number=300).output  # a sixth of the window above the line
    assert "(133 more lines above)" in out and "134:line 134" in out and "1133:line 1133" in out


# -- search ----------------------------------------------------------------------


def test_search_is_literal_by_default_and_grep_regex_when_configured(ctx: ToolContext) -> None:
    ctx.sandbox.write_file("a.py", "def train(x):\n    return x\ndef train_fast(y):\n    pass\n")
    ctx.sandbox.write_file("src/b.py", "# train(z) here\n")
    assert "No matches" in call(ctx, "search_dir", search_term="def train.*(").output
    ctx.tool_config = {"search": "basic"}  # MLGym's search.sh: plain grep, a basic regex
    out = call(ctx, "search_dir", search_term="def train.*(").output
    assert "a.py (2 matches)" in out and "b.py" not in out
    assert "b.py (1 matches)" in call(ctx, "search_dir", search_term="^# train").output
    out = call(ctx, "search_file", search_term="train_\\?fast", file="a.py").output
    assert "Line 3:def train_fast(y):" in out and "Line 1:" not in out
    # in a basic regex `+` is literal; grep -E reads it as "one or more"
    assert "No matches" in call(ctx, "search_file", search_term="ra+in", file="a.py").output
    ctx.tool_config = {"search": "extended"}
    out = call(ctx, "search_file", search_term="ra+in", file="a.py").output
    assert "Line 1:" in out and "Line 3:" in out


def test_a_bad_regex_or_mode_is_one_clear_error(ctx: ToolContext) -> None:
    ctx.sandbox.write_file("a.py", "x = 1\n")
    ctx.tool_config = {"search": "extended"}
    with pytest.raises(ToolError, match=r"search_file: cannot search .*a.py: .*extended regular"):
        call(ctx, "search_file", search_term="(unclosed", file="a.py")
    with pytest.raises(ToolError, match="search_dir: cannot search"):
        call(ctx, "search_dir", search_term="(unclosed")
    ctx.tool_config = {"search": "fuzzy"}
    with pytest.raises(ToolError, match="tool_config.rgym.search: unknown search mode 'fuzzy'"):
        call(ctx, "search_dir", search_term="x")


# -- lint --------------------------------------------------------------------------


def test_mlgym_selection_reports_e111_with_codes_and_the_default_does_not() -> None:
    two_spaces = "def f():\n  return 1\n"
    assert lint_python(two_spaces) == []
    errors = lint_python(two_spaces, select=MLGYM_SELECT)
    assert [(e.line, e.code) for e in errors] == [(2, "E111")]
    assert str(errors[0]) == "line 2: indentation is not a multiple of 4 [E111]"
    # a comment's indentation is E114 (not selected), tabs count 8, continuation lines are not checked
    assert lint_python("def f():\n\treturn (1,\n   2)\n  # note\n", select=MLGYM_SELECT) == []
    # MLGym's selection has no F823 (local used before assignment); rgym's default has it
    local = "x = 1\ndef f():\n    print(x)\n    x = 2\n"
    assert [e.code for e in lint_python(local)] == ["F823"]
    assert lint_python(local, select=MLGYM_SELECT) == []
    # a file that does not parse gets only its E999, as with flake8
    assert [e.code for e in lint_python("def f(:\n  x\n", select=MLGYM_SELECT)] == ["E999"]


def test_e902_is_a_tokenizer_failure_and_codes_are_checked() -> None:
    (error,) = indentation_errors("x = (1,\n")
    assert error.code == "E902" and error.message.startswith("TokenError")
    assert select_codes("mlgym") == MLGYM_SELECT
    assert select_codes("E111, f821") == ("E111", "F821")
    with pytest.raises(ValueError, match="tool_config.rgym.lint: unknown lint code.*W191"):
        select_codes(["E111", "W191"])


def test_edit_under_mlgym_lint_rejects_a_new_e111_and_keeps_the_file(ctx: ToolContext) -> None:
    ctx.sandbox.write_file("m.py", "def f():\n    return 1\n")
    call(ctx, "open", path="m.py")
    assert not call(ctx, "edit", start_line=2, end_line=2, replacement="  return 2").error
    ctx.sandbox.write_file("m.py", "def f():\n    return 1\n")
    ctx.tool_config = {"lint": "mlgym"}
    res = call(ctx, "edit", start_line=2, end_line=2, replacement="  return 2")
    assert res.error and "- line 2: indentation is not a multiple of 4 [E111]" in res.output
    assert ctx.sandbox.read_file("m.py") == b"def f():\n    return 1\n"
    ctx.tool_config = {"lint": ["E999", "bogus"]}
    with pytest.raises(ToolError, match="unknown lint code"):
        call(ctx, "edit", start_line=2, end_line=2, replacement="    return 3")


# -- status: working directory ---------------------------------------------------


def test_bash_reports_the_shells_working_directory_for_the_status_line(ctx: ToolContext) -> None:
    bash = TOOLS["bash"]
    assert bash.status(ctx) == {"working_dir": ctx.sandbox.workspace}
    call(ctx, "bash", command="mkdir -p sub/deeper && cd sub/deeper")
    assert bash.status(ctx) == {"working_dir": f"{ctx.sandbox.workspace}/sub/deeper"}
    call(ctx, "bash", command="cd .. ; echo 'a line that is not a path'")
    assert bash.status(ctx) == {"working_dir": f"{ctx.sandbox.workspace}/sub"}
    assert TOOLS["open"].status(ctx) == {"open_file": "n/a"}


# -- budget: MLGym's training-command rule ----------------------------------------


def test_training_commands_get_the_training_timeout_by_mlgyms_substring_rule() -> None:
    budget = Budget(action_timeout_s=25, training_timeout_s=1800)
    for command in ("python train.py", "cd src && python3 -u train.py", "torchrun --nproc 2 t.py",
                    "accelerate launch t.py", "deepspeed t.py", "nohup python t.py &",
                    "cat notes_about_python.txt"):  # a substring, as MLGym matches it
        assert budget.timeout_for(command) == 1800, command
    for command in ("ls -la", "pip install numpy", "sleep 100"):
        assert budget.timeout_for(command) == 25, command
    assert budget.timeout_for(None) == 25  # tools other than the shell
    assert Budget(action_timeout_s=25).timeout_for("python t.py") == 25  # no training timeout set
    own = Budget(action_timeout_s=25, training_timeout_s=60, training_commands=["make"])
    assert own.timeout_for("make all") == 60 and own.timeout_for("python t.py") == 25


# -- profiles: prompt, prompt_file, tool_config ---------------------------------------

TASK_YAML = """\
id: test/profiled
description: rgym's statement
metrics: [{name: accuracy}]
tool_config: {rgym: {window: 200, max_results: 7}, other: {x: 1}}
budget: {max_steps: 10, time_limit_s: 600, action_timeout_s: 60}
default_profile: plain
profiles:
  plain: {description: as the task}
  inline:
    prompt: "the original benchmark's statement"
  mlgym:
    prompt_file: prompts/mlgym.md
    budget: {max_steps: 50, time_limit_s: null, action_timeout_s: 25, training_timeout_s: 1800}
    tool_config: {rgym: {window: 1000, search: basic, lint: mlgym}}
"""


def test_a_profile_replaces_the_statement_and_merges_tool_config(tmp_path: Path) -> None:
    from rgym_core.packs import load_task

    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mlgym.md").write_text("MLGym's statement\nwith {dataset_docs} filled\n")
    (tmp_path / "task.yaml").write_text(TASK_YAML)
    task = load_task(tmp_path / "task.yaml")
    plain = task.with_profile()
    assert plain.description == "rgym's statement" and plain.tool_config["rgym"]["window"] == 200
    assert task.with_profile("inline").description == "the original benchmark's statement"
    mlgym = task.with_profile("mlgym")
    assert mlgym.description == "MLGym's statement\nwith {dataset_docs} filled\n"
    assert mlgym.tool_config == {"rgym": {"window": 1000, "max_results": 7, "search": "basic",
                                          "lint": "mlgym"}, "other": {"x": 1}}
    assert mlgym.budget.time_limit_s is None and mlgym.budget.max_steps == 50
    assert mlgym.budget.timeout_for("python t.py") == 1800 and mlgym.budget.timeout_for("ls") == 25
    assert task.tool_config["rgym"]["window"] == 200  # the task itself is unchanged


def test_profile_prompt_errors_name_the_file_and_field(tmp_path: Path) -> None:
    from rgym_core.packs import load_task

    (tmp_path / "task.yaml").write_text(TASK_YAML)
    task = load_task(tmp_path / "task.yaml")
    with pytest.raises(SpecError, match=r"task.yaml: profiles\['mlgym'\].prompt_file: cannot read "
                                         r"'prompts/mlgym.md' \(FileNotFoundError\)"):
        task.with_profile("mlgym")
    (tmp_path / "task.yaml").write_text(TASK_YAML.replace(
        'prompt: "the original benchmark\'s statement"', "prompt: a\n    prompt_file: b.md"))
    with pytest.raises(SpecError, match=r"profiles.*prompt_file.*either 'prompt'.*not both"):
        load_task(tmp_path / "task.yaml")


def test_tool_options_override_the_profile_per_key_and_name_a_bad_key() -> None:
    from rgym_core.runner import RunError, with_tool_options

    task = TaskSpec(id="test/aci", description="d", metrics=[Metric("accuracy")],
                    tool_config={"rgym": {"window": 1000, "search": "basic"}, "jobs": {"max_jobs": 2}})
    out = with_tool_options(task, {"window": 100, "jobs.max_jobs": 4, "memory.top_k": 3})
    assert out.tool_config == {"rgym": {"window": 100, "search": "basic"}, "jobs": {"max_jobs": 4},
                               "memory": {"top_k": 3}}
    with pytest.raises(RunError, match=r"--tool-option 'rgym\.': give KEY=VALUE or NAMESPACE\.KEY"):
        with_tool_options(task, {"rgym.": 1})

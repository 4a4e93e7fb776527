"""The three tools every episode has: the shell, ``validate`` and ``submit``."""

from __future__ import annotations

from typing import Any

from rgym_core.tools import Tool, ToolArg, ToolContext, ToolResult, ToolSchema


class BashTool(Tool):
    """A command in the episode's persistent shell (cwd and variables persist)."""

    schema = ToolSchema(
        name="bash",
        description="Run a shell command in the workspace's persistent shell session; the "
                    "working directory and exported variables persist between commands.",
        args=[ToolArg("command", "string", "the shell command line to run")],
        text_form="rest",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = ctx.sandbox.run(args["command"], timeout=ctx.action_timeout_s)
        output = result.output
        if result.timed_out:
            output += (f"\n[command timed out after {ctx.action_timeout_s:g} s and was killed; "
                       "run long jobs in the background or split them]")
        _track_cwd(ctx)
        return ToolResult(output=output, error=result.exit_code != 0,
                          info={"exit_code": result.exit_code, "timed_out": result.timed_out,
                                "truncated": result.truncated})

    def status(self, ctx: ToolContext) -> dict[str, Any]:
        """The shell's working directory, for the agent's status block (MLGym's
        ``(Current directory: ...)``)."""
        return {WORKING_DIR: ctx.state.get(WORKING_DIR) or ctx.sandbox.workspace}


#: State key (in ``ToolContext.state``) of the shell's working directory.
WORKING_DIR = "working_dir"


def _track_cwd(ctx: ToolContext) -> None:
    """Ask the shell for its working directory after a command (only a shell command
    changes it); an answer that is not an absolute path keeps the last one."""
    try:
        answer = ctx.sandbox.run("pwd", timeout=10)
    except Exception:  # noqa: BLE001 - the status line is informative only
        return
    lines = answer.output.strip().splitlines()
    if answer.exit_code == 0 and not answer.timed_out and len(lines) == 1 and lines[0].startswith("/"):
        ctx.state[WORKING_DIR] = lines[0]


def _format_scores(scores: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in scores.items()) or "(none)"


class ValidateTool(Tool):
    """Grade the current workspace without ending the episode."""

    schema = ToolSchema(
        name="validate",
        description="Grade the current workspace with the task's grader, on the same hidden "
                    "test data as the final submission (as MLGym's validate), without ending "
                    "the episode; prints your score and the baseline's.",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        record = ctx.grade("validate")
        if not record.valid:
            return ToolResult(output=f"Validation failed: {record.error}", error=True,
                              info={"valid": False})
        baseline = ctx.task.baseline_scores
        text = f"Your scores: {_format_scores(record.scores)}"
        if baseline:
            text += f"\nBaseline scores: {_format_scores(baseline)}"
        return ToolResult(output=text, score=dict(record.scores), info={"valid": True})


class SubmitTool(Tool):
    """End the episode; the workspace is graded as the final submission."""

    schema = ToolSchema(
        name="submit",
        description="Submit the current workspace as your final solution and end the episode.",
    )
    default = True

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(output="Submitted.", submit=True)

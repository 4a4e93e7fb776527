"""The prompts: system prompt, first task message, status block, re-query notes."""

from __future__ import annotations

from typing import Any

from rgym_core import TaskContext

SYSTEM_COMMON = """\
SETTING: You are an autonomous machine-learning researcher working in a command-line \
environment. Besides ordinary shell commands you have a special interface: a file viewer that \
shows a window of lines with line numbers, an editor that checks Python files and refuses \
changes that break them, search commands, `validate` (scores your current work with the \
task's grader, on the same hidden test data as the final submission, and shows the baseline's \
score) and `submit` (ends the episode; your workspace \
is graded).

Your goal is the best possible score, not just a first working submission: read the baseline, \
form hypotheses, try improvements, and validate often. Do not run the grader yourself; use \
`validate`, whose results are recorded. Each action must finish within the action timeout; run \
long jobs in the background and poll them. Interactive programs (vim, nano, less, a bare \
python or bash) are not available: write scripts and run them. Indentation matters when you \
edit or insert code.

A status line after every observation shows the steps, time and money left, the open file \
and the current directory (relative paths start there). When little is \
left, make sure a valid submission exists and submit it; an episode that runs out of budget is \
graded on whatever the workspace holds."""

SYSTEM_TEXT = SYSTEM_COMMON + """

COMMANDS:
{command_docs}

RESPONSE FORMAT:
Every reply has a DISCUSSION (your reasoning) followed by exactly ONE command in a fenced \
block, for example:
DISCUSSION
First I'll list the files in the workspace to see what the baseline looks like.
```
ls -a
```
Send one command per reply and wait for its output before the next. Put nothing after the \
command block."""

SYSTEM_TOOLS = SYSTEM_COMMON + """

Act by calling exactly ONE of the provided tools per reply (use `bash` for shell commands), \
after a short explanation of your reasoning. Wait for each result before the next call."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unlimited"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_value(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def budget_text(context: TaskContext) -> str:
    b = context.budget
    parts = [f"at most {b.max_steps} actions" if b.max_steps else "no step limit",
             f"{_duration(b.time_limit_s)} of wall-clock time",
             f"{_duration(b.action_timeout_s)} per action"]
    if b.training_timeout_s is not None:
        parts[-1] += (f" ({_duration(b.training_timeout_s)} for a command that runs "
                      f"{', '.join(b.training_commands)})")
    if b.cost_limit_usd is not None:
        parts.append(f"${b.cost_limit_usd:g} of model spending")
    if b.token_limit is not None:
        parts.append(f"{b.token_limit:,} model tokens")
    return "; ".join(parts)


def task_message(context: TaskContext, opening: str) -> str:
    """The first user message: the task, its budget, baseline and resources."""
    lines = ["We're currently solving the following task.", "", "TASK DESCRIPTION:",
             context.description.strip(), "", f"BUDGET: {budget_text(context)}."]
    if context.metrics:
        metrics = ", ".join(f"{m.name} ({m.direction})" for m in context.metrics)
        lines.append(f"METRICS: {metrics}; the first is the one that counts.")
    if context.baseline_scores:
        scores = ", ".join(f"{k}={v:g}" for k, v in context.baseline_scores.items())
        lines.append(f"BASELINE SCORES (to beat): {scores}.")
    if context.baseline_command:
        lines.append(f"The baseline is produced by: `{context.baseline_command}`.")
    facts = {k: v for k, v in context.sandbox_facts.items() if v not in (None, "", [], {})}
    if facts:
        lines.append("RESOURCES: " + "; ".join(f"{k}: {_value(v)}" for k, v in facts.items()) + ".")
    lines += ["", opening.strip()]
    return "\n".join(lines)


KNOWN = {"steps_used", "steps_left", "max_steps", "elapsed_s", "time_left_s", "cost_usd",
         "cost_limit_usd", "tokens", "token_limit", "open_file", "working_dir"}


def status_block(snapshot: dict[str, Any]) -> str:
    """Step, time, cost (and tokens) left; the open file and the shell's working
    directory; then resources and the other facts tools report (memory count...)."""
    step = int(snapshot.get("steps_used") or 0) + 1
    max_steps = snapshot.get("max_steps")
    parts = [f"Step {step} of {max_steps}, {snapshot.get('steps_left')} left" if max_steps
             else f"Step {step}"]
    left = snapshot.get("time_left_s")
    if left is not None:
        total = float(left) + float(snapshot.get("elapsed_s") or 0)
        parts.append(f"time left {_duration(left)} of {_duration(total)}")
    cost = float(snapshot.get("cost_usd") or 0)
    limit = snapshot.get("cost_limit_usd")
    parts.append(f"cost ${cost:.4f} of ${limit:g}" if limit is not None else f"cost ${cost:.4f}")
    if snapshot.get("token_limit") is not None:
        parts.append(f"tokens {snapshot.get('tokens', 0):,} of {snapshot['token_limit']:,}")
    lines = ["(" + " | ".join(parts) + ")"]
    # the viewer's and the shell's state, in MLGym's words (its next_step_template)
    if snapshot.get("open_file"):
        lines.append(f"(Open file: {snapshot['open_file']})")
    if snapshot.get("working_dir"):
        lines.append(f"(Current directory: {snapshot['working_dir']})")
    extra = {k: v for k, v in snapshot.items() if k not in KNOWN and v not in (None, "", [], {})}
    if extra:
        lines.append("(" + " | ".join(f"{k.replace('_', ' ')}: {_value(v)}" for k, v in extra.items())
                     + ")")
    return "\n".join(lines)


def observation_text(output: str, *, error: bool, exit_code: int | None, truncated: bool) -> str:
    text = output.rstrip("\n")
    if not text:
        text = ("Your command ran successfully and did not produce any output." if not error
                else "The command failed without output.")
    if exit_code not in (None, 0):
        text += f"\n(exit code {exit_code})"
    if truncated:
        text += "\n(output truncated)"
    return text


def requery_text(error: str, mode: str) -> str:
    how = ("Reply again with a DISCUSSION and exactly one command in a fenced block." if mode == "text"
           else "Reply again by calling exactly one of the provided tools.")
    return f"Your previous reply could not be run: {error}\n{how}"

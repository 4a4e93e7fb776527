"""Scripted model conversations for the demo task (rgym/demo), shared by the tests."""

from __future__ import annotations

from rgym_llm.testing import Reply

FIT = """\
n = len(rows)
mx = sum(x for x, _ in rows) / n
my = sum(y for _, y in rows) / n
slope = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
intercept = my - slope * mx"""


def fence(discussion: str, command: str) -> str:
    return f"DISCUSSION\n{discussion}\n```\n{command}\n```"


def demo_text_script() -> list[Reply]:
    """Open baseline.py, make an edit the linter rejects (an undefined name), fix
    it by defining the name first, run, validate and submit; with one malformed
    reply and one blocked command along the way (each re-queried)."""
    return [
        Reply(text="Let me think about the task first."),  # no command: re-queried
        Reply(text=fence("I'll read the baseline.", "open baseline.py")),
        Reply(text=fence("Add an intercept to the prediction.",
                         "edit 18:18\n        writer.writerow([idx, slope * x + intercept])\nend_of_edit")),
        Reply(text=fence("Let me edit it in vim instead.", "vim baseline.py")),  # blocked: re-queried
        Reply(text=fence("The linter refused: intercept is undefined. Fit it first.",
                         f"edit 10:10\n{FIT}\nend_of_edit")),
        Reply(text=fence("Now use the intercept.",
                         "edit 22:22\n        writer.writerow([idx, slope * x + intercept])\nend_of_edit")),
        Reply(text=fence("Run the improved script.", "python baseline.py")),
        Reply(text=fence("Check the score.", "validate")),
        Reply(text=fence("Better than the baseline; submitting.", "submit")),
    ]


def demo_tools_script() -> list[Reply]:
    """The same episode with native tool calls."""
    return [
        Reply.tool("open", {"path": "baseline.py"}, text="I'll read the baseline."),
        Reply.tool("edit", {"start_line": 18, "end_line": 18,
                            "replacement": "        writer.writerow([idx, slope * x + intercept])"}),
        Reply.tool("edit", {"start_line": 10, "end_line": 10, "replacement": FIT}),
        Reply.tool("edit", {"start_line": 22, "end_line": 22,
                            "replacement": "        writer.writerow([idx, slope * x + intercept])"}),
        Reply.tool("bash", {"command": "python baseline.py"}),
        Reply.tool("validate", {}),
        Reply.tool("submit", {}),
    ]


def demo_costly_script() -> list[Reply]:
    """A first submission straight away (so the autosubmission has something to
    grade), then the text-mode episode."""
    return [Reply(text=fence("Make a first submission with the baseline.", "python baseline.py")),
            *demo_text_script()]

"""What the file tools share about a change: the episode's lint selection and the
diff recorded for ``rgym view``.

The viewer's ``create`` and the editor's ``edit`` and ``insert`` both lint with
:func:`lint_selection` and record :func:`change_diff` in the step's
``observation.info.diff`` (never shown to the model).
"""

from __future__ import annotations

import difflib

from rgym_core.aci.lint import select_codes
from rgym_core.tools import ToolContext, ToolError

#: The diff an edit records for the viewer is cut here (the file itself is whole).
MAX_RECORDED_DIFF = 60_000


def lint_selection(ctx: ToolContext) -> tuple[str, ...]:
    """The lint codes of the episode (``tool_config: {rgym: {lint: ...}}``)."""
    try:
        return select_codes(ctx.tool_config.get("lint"))
    except ValueError as exc:
        raise ToolError(f"{exc} (in task.yaml or the profile)") from None


def change_diff(path: str, original: list[str], proposed: list[str]) -> str:
    """The unified diff of one change to ``path`` (recorded in the step's
    ``observation.info.diff`` for ``rgym view``; never shown to the model)."""
    text = "".join(difflib.unified_diff([f"{line}\n" for line in original], [f"{line}\n" for line in proposed],
                                        fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"))
    if len(text) > MAX_RECORDED_DIFF:
        text = text[:MAX_RECORDED_DIFF] + f"\n[... diff cut at {MAX_RECORDED_DIFF:,} characters ...]\n"
    return text


__all__ = ["MAX_RECORDED_DIFF", "change_diff", "lint_selection"]

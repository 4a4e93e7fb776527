"""The live progress line of a running episode and its closing summary."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from rgym_core.records import EpisodeResult
from rgym_core.specs import TaskSpec

END_REASONS = {
    "submit": "the agent submitted",
    "max_steps": "the step budget ran out",
    "time": "the time limit was reached",
    "cost": "the cost limit would have been crossed",
    "tokens": "the token limit was reached",
    "agent_error": "the agent failed",
    "format_error": "the agent gave malformed output too often",
    "sandbox_error": "the sandbox failed",
    "cancelled": "a signal cancelled the episode",
    "error": "rgym failed",
}


def _action_text(action: Any) -> str:
    if action.tool == "bash":
        text = str(action.args.get("command", ""))
    else:
        args = " ".join(f"{v}" for v in action.args.values())
        text = f"{action.tool} {args}".strip()
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class EpisodeProgress:
    """Shows ``step 3/20 · bash: python train.py · 12 s · $0.0123`` on stderr while
    an episode runs (only on a terminal unless forced), then a summary."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.console = Console(stderr=True, soft_wrap=True)
        self.out = Console(soft_wrap=True)
        self._status: Status | None = None

    def __enter__(self) -> EpisodeProgress:
        if self.enabled and self.console.is_terminal:
            self._status = self.console.status("setting up the episode...")
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def update(self, event: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if event == "start" and self._status is None:
            self.console.print(f"[dim]run directory: {data['run_dir']}[/dim]")
        if event in ("action", "step"):
            status = data["status"]
            index, action = ((data["index"], data["action"]) if event == "action"
                             else (data["step"].index, data["step"].action))
            total = status.budget.max_steps or "∞"
            cost = f" · ${status.usage.cost_usd:.4f}" if status.usage.cost_usd else ""
            state = "running" if event == "action" else "done"
            line = (f"step {index}/{total} · {action.tool}: {_action_text(action)} · {state} · "
                    f"{status.elapsed_s:.0f} s{cost}")
            if self._status is not None:
                self._status.update(line)
            elif event == "step" and not self.console.is_terminal:
                print(line, file=sys.stderr, flush=True)
        elif event == "grading" and self._status is not None:
            self._status.update(f"grading ({data['kind']})...")

    def summary(self, result: EpisodeResult, task: TaskSpec | None) -> None:
        primary = result.primary_metric
        score = result.primary_score
        colour = "green" if score is not None else "red"
        self.out.print(f"[bold]{result.task_id}[/bold] with {result.agent}"
                       + (f" ({result.model})" if result.model else "")
                       + f": [bold {colour}]{result.status.value}[/bold {colour}]")
        if score is not None:
            base = result.baseline_scores.get(primary or "")
            base_text = f" (baseline {base:.4g})" if base is not None else ""
            self.out.print(f"score: {primary} = {score:.4g}{base_text}")
            others = {k: v for k, v in (result.final_scores or {}).items() if k != primary}
            if others:
                self.out.print("other metrics: " + ", ".join(f"{k} = {v:.4g}" for k, v in others.items()))
        reason = END_REASONS.get(result.end_reason or "", result.end_reason)
        if reason and result.end_reason != "submit":
            self.out.print(f"ended because {reason}", highlight=False)
        if result.agent_error:
            self.out.print(f"[red]agent error:[/red] {escape(result.agent_error)}", highlight=False)
        if result.error:
            self.out.print(f"[red]error:[/red] {escape(result.error)}", highlight=False)
        cost = f", cost ${result.cost_usd:.4f}" if result.cost_usd else ""
        self.out.print(f"steps: {result.steps}, time: {result.duration_s:.1f} s{cost}")
        self.out.print(f"run directory: {result.run_dir}", highlight=False, soft_wrap=True)

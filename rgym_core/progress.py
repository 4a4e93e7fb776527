"""The live progress line of a running episode and its closing summary."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.text import Text

from rgym_core.records import EndReason, EpisodeResult
from rgym_core.specs import TaskSpec

#: Why an episode ended, in words (by end reason).
END_REASONS = {reason.value: reason.describe for reason in EndReason}


def _action_text(action: Any) -> str:
    if action.tool == "bash":
        text = str(action.args.get("command", ""))
    else:
        args = " ".join(f"{v}" for v in action.args.values())
        text = f"{action.tool} {args}".strip()
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class _LiveLine:
    """The progress line, computed each time rich redraws it, so the clock keeps
    moving during a long step."""

    def __init__(self, text: str = "setting up the episode...") -> None:
        self.status: Any = None
        self.index: int = 0
        self.action: Any = None
        self.state = ""
        self.text = text

    def __rich__(self) -> str:
        if self.status is None or self.action is None:
            return self.text
        status = self.status
        total = status.budget.max_steps or "∞"
        cost = f" · ${status.usage.cost_usd:.4f}" if status.usage.cost_usd else ""
        return (f"step {self.index}/{total} · {escape(self.action.tool)}: "
                f"{escape(_action_text(self.action))} · {self.state} · "
                f"{status.elapsed_s:.0f} s{cost}")


class EpisodeProgress:
    """Shows ``step 3/20 · bash: python train.py · running · 12 s · $0.0123`` on
    stderr while an episode runs (a live line on a terminal, whose clock keeps
    moving during a long step; one line per step otherwise), prints the run
    directory as soon as it exists, then a summary."""

    def __init__(self, enabled: bool = True, *, console: Console | None = None,
                 out: Console | None = None, refresh_per_second: float = 4.0) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.out = out or Console(soft_wrap=True)
        self._status: Status | None = None
        self._line = _LiveLine()
        self._refresh = refresh_per_second
        self._announced = False

    def __enter__(self) -> EpisodeProgress:
        if self.enabled and self.console.is_terminal:
            self._status = Status(self._line, console=self.console,
                                  refresh_per_second=self._refresh)
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def update(self, event: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if event in ("setup", "start") and not self._announced and data.get("run_dir"):
            self._announced = True
            self.console.print(f"[dim]run directory: {escape(str(data['run_dir']))}[/dim]",
                               highlight=False, soft_wrap=True)
        if event in ("action", "step"):
            status = data["status"]
            index, action = ((data["index"], data["action"]) if event == "action"
                             else (data["step"].index, data["step"].action))
            line = self._line
            line.status, line.index, line.action = status, index, action
            line.state = "running" if event == "action" else "done"
            if self._status is not None:
                self._status.update(line)
            elif event == "step" and not self.console.is_terminal:
                print(Text.from_markup(line.__rich__()).plain, file=sys.stderr, flush=True)
        elif event == "processes_killed":
            self.console.print(f"[yellow]{escape(str(data['message']))}[/yellow]",
                               highlight=False, soft_wrap=True)
        elif event == "grading":
            self._line.action = None
            self._line.text = f"grading ({data['kind']})..."
            if self._status is not None:
                self._status.update(self._line)

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
        if reason and result.end_reason != EndReason.SUBMIT:
            self.out.print(f"ended because {reason}", highlight=False)
        if result.agent_error:
            self.out.print(f"[red]agent error:[/red] {escape(result.agent_error)}", highlight=False)
        if result.error:
            self.out.print(f"[red]error:[/red] {escape(result.error)}", highlight=False)
        cost = f", cost ${result.cost_usd:.4f}" if result.cost_usd else ""
        self.out.print(f"steps: {result.steps}, time: {result.duration_s:.1f} s{cost}")
        self.out.print(f"run directory: {result.run_dir}", highlight=False, soft_wrap=True)
        verdict = integrity_verdict(result)
        if verdict is not None:
            self.out.print(verdict, highlight=False)


def integrity_verdict(result: EpisodeResult) -> str | None:
    """One line on the integrity monitor's verdict (``result.extras["integrity"]``),
    or None when no monitor ran."""
    report = result.extras.get("integrity")
    if not isinstance(report, dict):
        return None
    if not report.get("flagged"):
        return "integrity: clean (no finding)" if not report.get("findings") else \
            f"integrity: not flagged ({len(report['findings'])} note(s), see integrity.json)"
    kinds = ", ".join(str(k) for k in report.get("kinds") or []) or "see integrity.json"
    return f"integrity: FLAGGED ({kinds}); this run's score is not to be trusted as it stands"

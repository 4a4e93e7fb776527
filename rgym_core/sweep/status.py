"""The live state of a sweep: per cell and per task, cost so far, ETA.

The engine updates one :class:`SweepStatus` from the events it emits; the live
table (:mod:`rgym_core.sweep.display`) renders it.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from attrs import define, field

from rgym_core.sweep.matrix import Cell

#: Row states (``queued``: submitted, but the scheduler has not started it yet).
PENDING, QUEUED, RUNNING, DONE, FAILED, WAITING = "pending", "queued", "running", "done", "failed", "waiting"


@define
class CellRow:
    """One cell as the live table shows it."""

    cell: Cell
    state: str = PENDING
    attempt: int = 0
    step: int | None = None
    cost_usd: float = 0.0
    status: str | None = None
    score: float | None = None
    started: float | None = None
    duration_s: float | None = None
    error: str | None = None
    #: Finished before this invocation (counted done, not in the throughput).
    earlier: bool = False


@define
class TaskTally:
    """Per task (and profile): how many cells are in each state, scores so far, cost."""

    task: str
    metric: str | None = None
    total: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0
    queued: int = 0
    scores: list[float] = field(factory=list)
    cost_usd: float = 0.0

    @property
    def pending(self) -> int:
        return self.total - self.done - self.failed - self.running - self.queued

    @property
    def mean_score(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None


@define
class SweepStatus:
    """Everything the live table shows."""

    sweep_dir: str
    executor: str
    rows: dict[str, CellRow] = field(factory=dict)
    started: float = field(factory=time.monotonic)
    retries: int = 0
    cancelling: bool = False
    metrics: dict[str, str] = field(factory=dict)

    def add(self, cell: Cell, *, state: str = PENDING, result: Any = None) -> None:
        row = CellRow(cell, state=state)
        if result is not None:
            self._fill(row, result)
            row.earlier = True
        self.rows[cell.key] = row

    @staticmethod
    def _fill(row: CellRow, result: Any) -> None:
        row.status = result.status.value
        row.cost_usd = float(result.cost_usd or 0.0)
        row.duration_s = result.duration_s
        scores = result.final_scores or {}
        row.score = scores.get(result.primary_metric) if result.primary_metric else None
        row.step = result.steps
        row.error = result.error

    # -- updates -----------------------------------------------------------------------
    def queued_cell(self, key: str, attempt: int) -> None:
        """Submitted to a scheduler that has not started it yet (a pending Slurm job)."""
        row = self.rows[key]
        row.state, row.attempt, row.started, row.step, row.cost_usd = QUEUED, attempt, None, None, 0.0
        row.error = None

    def started_cell(self, key: str, attempt: int) -> None:
        row = self.rows[key]
        row.state, row.attempt, row.started, row.step, row.cost_usd = RUNNING, attempt, time.monotonic(), 0, 0.0
        row.error = None

    def stepped(self, key: str, step: int | None, cost_usd: float | None) -> None:
        row = self.rows[key]
        if step is not None:
            row.step = step
        if cost_usd is not None:
            row.cost_usd = cost_usd

    def finished(self, key: str, state: str, result: Any = None, error: str | None = None) -> None:
        row = self.rows[key]
        row.state = state
        if result is not None:
            self._fill(row, result)
        if error:
            row.error = error
        if row.started is not None and row.duration_s is None:
            row.duration_s = time.monotonic() - row.started

    def requeued(self, key: str) -> None:
        row = self.rows[key]
        row.state, row.step, row.cost_usd, row.score, row.status = PENDING, None, 0.0, None, None
        row.duration_s = None
        self.retries += 1

    # -- figures -----------------------------------------------------------------------
    def count(self, state: str) -> int:
        return sum(1 for r in self.rows.values() if r.state == state)

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def cost_usd(self) -> float:
        return sum(r.cost_usd for r in self.rows.values())

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def eta_s(self) -> float | None:
        """Seconds left at this invocation's rate of finished episodes (``None`` until
        one finished)."""
        finished_now = [r for r in self.rows.values() if r.state in (DONE, FAILED) and not r.earlier]
        left = self.count(PENDING) + self.count(QUEUED) + self.count(RUNNING) + self.count(WAITING)
        if left == 0:
            return 0.0
        if not finished_now:
            return None
        rate = len(finished_now) / max(self.elapsed_s, 1e-6)
        return left / rate

    def tallies(self) -> list[TaskTally]:
        out: dict[str, TaskTally] = {}
        for row in self.rows.values():
            label = row.cell.task_label
            tally = out.setdefault(label, TaskTally(task=label, metric=self.metrics.get(label)))
            tally.total += 1
            tally.cost_usd += row.cost_usd
            if row.state == DONE:
                tally.done += 1
                if row.score is not None and not math.isnan(row.score):
                    tally.scores.append(row.score)
            elif row.state == FAILED:
                tally.failed += 1
            elif row.state in (RUNNING, WAITING):
                tally.running += 1
            elif row.state == QUEUED:
                tally.queued += 1
        return [out[k] for k in sorted(out)]


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


__all__ = ["CellRow", "DONE", "FAILED", "PENDING", "QUEUED", "RUNNING", "SweepStatus", "TaskTally", "WAITING",
           "duration_text"]

"""The sweep engine: plan from the folder's state, check, run through an executor,
retry infrastructure failures, and report every event.

:func:`plan` sorts the cells by what their folders hold (done, to run, still
running elsewhere), moving leftovers of killed or stopped attempts aside.
:func:`preflight_cells` checks each distinct (task, profile, agent, model)
before anything runs.  :class:`SweepEngine` then keeps the executor busy, reads
each finished cell's ``result.json`` (the one source of truth), retries what the
infrastructure ended while ``retry_errors`` allows, and stops cleanly on
SIGINT/SIGTERM (a second signal exits at once; a re-run continues).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.sweep.executors import EpisodeJob, Executor, JobUpdate, preparing
from rgym_core.sweep.folder import CellState, SweepFolder
from rgym_core.sweep.matrix import Cell, SweepSpec, cell_config
from rgym_core.sweep.status import DONE, FAILED, PENDING, QUEUED, RUNNING, WAITING, SweepStatus

EventSink = Callable[[dict[str, Any]], None]


@define
class Plan:
    """What a sweep invocation has to do."""

    cells: list[Cell]
    done: list[Cell] = field(factory=list)
    failed: list[Cell] = field(factory=list)
    to_run: list[Cell] = field(factory=list)
    waiting: list[Cell] = field(factory=list)
    #: (cell, reason, where the old attempt went)
    retired: list[tuple[Cell, str, str]] = field(factory=list)
    #: (cell, reason): interrupted cells (also in ``to_run``) continued in place by
    #: ``rgym run --resume``'s machinery instead of being moved aside and run again.
    resumed: list[tuple[Cell, str]] = field(factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return not self.to_run and not self.waiting


def plan(folder: SweepFolder, cells: list[Cell], *, retry_errors: int,
         resumable: Callable[[Cell], bool] | None = None) -> Plan:
    """Classify every cell; move aside what must run again (see :class:`CellState`).
    An interrupted or killed cell for which ``resumable`` says True is resumed in
    place instead (:mod:`rgym_core.resume`)."""
    out = Plan(cells=list(cells))
    for cell in cells:
        status = folder.state(cell)
        state = status.state
        if state is CellState.DONE:
            out.done.append(cell)
        elif state is CellState.MISSING:
            out.to_run.append(cell)
        elif state is CellState.RUNNING:
            out.waiting.append(cell)
        elif state is CellState.FAILED:
            if folder.failed_attempts(cell) < retry_errors:
                moved = folder.retire(cell, f"failed-{status.detail}")
                out.retired.append((cell, f"failed ({status.detail})", str(moved)))
                out.to_run.append(cell)
            else:
                out.failed.append(cell)
        else:  # interrupted by the sweep's own stop, or a leftover of a killed attempt
            if resumable is not None and resumable(cell):
                out.resumed.append((cell, f"{state.value} ({status.detail})"))
                out.to_run.append(cell)
                continue
            reason = ("interrupted-" if state is CellState.INTERRUPTED else "leftover-") + status.detail
            moved = folder.retire(cell, reason)
            out.retired.append((cell, f"{state.value} ({status.detail})", str(moved)))
            out.to_run.append(cell)
    return out


def preflight_cells(cells: list[Cell], spec: SweepSpec, folder: SweepFolder,
                    registry: Any) -> list[str]:
    """Check each distinct (task, profile, agent, model) as ``rgym run`` would before
    it creates anything (names, profile, model and key, datasets, model server);
    one line per problem."""
    from rgym_core.runner import Episode, RunError

    problems: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    for cell in cells:
        group = (cell.task, cell.profile, cell.agent, cell.model)
        if group in seen:
            continue
        seen.add(group)
        config = cell_config(cell, spec, folder.cell_dir(cell))
        try:
            episode = Episode(config, registry)
            with preparing(episode):
                episode.prepare()
            episode.close()
        except RunError as exc:
            problems.append(f"{cell.task_label} with {cell.agent}"
                            + (f" ({cell.model})" if cell.model else "") + f": {exc}")
        except Exception as exc:  # noqa: BLE001 - reported like the others
            problems.append(f"{cell.task_label} with {cell.agent}: {type(exc).__name__}: {exc}")
    return problems


@define
class Outcome:
    """How the invocation ended."""

    done: int = 0
    failed: int = 0
    cancelled: bool = False
    ran: int = 0
    elapsed_s: float = 0.0
    cost_usd: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.cancelled:
            return 130
        return 1 if self.failed else 0


class _Signals:
    """SIGINT/SIGTERM in the main thread: the first asks the sweep to stop, the second
    exits at once (run directories stay as they are; a re-run continues)."""

    def __init__(self, on_first: Callable[[str], None], on_second: Callable[[], None]) -> None:
        self.count = 0
        self.on_first = on_first
        self.on_second = on_second

    def handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1:
            self.on_first(signal.Signals(signum).name)
        else:
            self.on_second()

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old_int = signal.signal(signal.SIGINT, self.handler)
        old_term = signal.signal(signal.SIGTERM, self.handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)


class SweepEngine:
    """Runs a :class:`Plan` through an :class:`~rgym_core.sweep.executors.Executor`."""

    def __init__(self, folder: SweepFolder, spec: SweepSpec, the_plan: Plan, executor: Executor, *,
                 registry: Any, retry_errors: int = 0, sinks: list[EventSink] | None = None,
                 poll_s: float = 0.25, on_hard_stop: Callable[[], None] | None = None) -> None:
        self.folder = folder
        self.spec = spec
        self.plan = the_plan
        self.executor = executor
        self.registry = registry
        self.retry_errors = retry_errors
        self.sinks = list(sinks or [])
        self.poll_s = poll_s
        self.on_hard_stop = on_hard_stop
        self.status = SweepStatus(sweep_dir=str(folder.path), executor=executor.describe())
        self._journal: Any = None
        self._pending: deque[Cell] = deque(the_plan.to_run)
        self._inflight: dict[str, Cell] = {}
        self._attempts: dict[str, int] = {}
        self._to_resume = {c.key for c, _ in the_plan.resumed}
        self._session_failures: dict[str, int] = {}
        self._waiting: dict[str, Cell] = {c.key: c for c in the_plan.waiting}
        self._stop_reason: str | None = None
        for cell in the_plan.cells:
            self.status.metrics.setdefault(cell.task_label, self._metric(cell.task))
            state = folder.state(cell) if cell in the_plan.done or cell in the_plan.failed else None
            if cell in the_plan.done:
                self.status.add(cell, state=DONE, result=state.result if state else None)
            elif cell in the_plan.failed:
                self.status.add(cell, state=FAILED, result=state.result if state else None)
            elif cell.key in self._waiting:
                self.status.add(cell, state=WAITING)
            else:
                self.status.add(cell, state=PENDING)

    def _metric(self, task_id: str) -> str:
        try:
            return str(self.registry.task(task_id).primary_metric.name)
        except Exception:  # noqa: BLE001
            return ""

    # -- events ---------------------------------------------------------------------
    def emit(self, event: str, **data: Any) -> None:
        record = {"event": event, "time": round(time.time(), 3), **data}
        if self._journal is not None:
            self._journal.write(json.dumps(record, default=str) + "\n")
            self._journal.flush()
        for sink in self.sinks:
            sink(record)

    @staticmethod
    def _cell_data(cell: Cell) -> dict[str, Any]:
        return {"cell": cell.key, "task": cell.task, "profile": cell.profile, "agent": cell.agent,
                "model": cell.model, "seed": cell.seed, "repeat": cell.repeat}

    # -- the loop -------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        """Ask the sweep to stop: no new episode starts, running ones are cancelled."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self.status.cancelling = True
            self.executor.cancel()

    def _hard_stop(self) -> None:
        if self.on_hard_stop is not None:
            self.on_hard_stop()
        os._exit(130)

    def run(self) -> Outcome:
        started = time.monotonic()
        self.folder.state_dir.mkdir(parents=True, exist_ok=True)
        with self.folder.events_path.open("a", encoding="utf-8") as journal:
            self._journal = journal
            self.emit("sweep_start", sweep_dir=str(self.folder.path), executor=self.executor.describe(),
                      cells=len(self.plan.cells), complete=len(self.plan.done),
                      failed=len(self.plan.failed), to_run=len(self.plan.to_run),
                      waiting=len(self.plan.waiting), pid=os.getpid())
            for cell, reason, moved in self.plan.retired:
                self.emit("cell_retired", **self._cell_data(cell), reason=reason, moved_to=moved)
            for cell, reason in self.plan.resumed:
                self.emit("cell_resumed", **self._cell_data(cell), reason=reason)
            signals = _Signals(lambda name: self.stop(name), self._hard_stop)
            ran = 0
            with signals.installed():
                if self._pending or self._waiting:
                    self.executor.start(self.registry)
                    self.executor_started = True
                    self._adopt()
                try:
                    while self._pending or self._inflight or self._waiting:
                        if self._stop_reason is None:
                            while self._pending and len(self._inflight) < self.executor.capacity:
                                self._submit(self._pending.popleft())
                                ran += 1
                        elif not self._inflight:
                            break
                        if self.executor_started:
                            for update in self.executor.poll(self.poll_s if self._inflight else 0.0):
                                self._handle(update)
                        if self._waiting:
                            self._check_waiting()
                            if not self._inflight and not self._pending:
                                time.sleep(min(1.0, self.poll_s * 4))
                finally:
                    if self.executor_started:
                        self.executor.close()
            outcome = Outcome(done=self.status.count(DONE), failed=self.status.count(FAILED),
                              cancelled=self._stop_reason is not None, ran=ran,
                              elapsed_s=time.monotonic() - started, cost_usd=self.status.cost_usd)
            self.emit("sweep_end", done=outcome.done, failed=outcome.failed,
                      pending=self.status.count(PENDING) + self.status.count(WAITING),
                      queued=self.status.count(QUEUED), running=self.status.count(RUNNING),
                      cancelled=outcome.cancelled, stopped_by=self._stop_reason,
                      elapsed_s=round(outcome.elapsed_s, 3), cost_usd=round(outcome.cost_usd, 6),
                      exit_code=outcome.exit_code)
            self._journal = None
        return outcome

    def _adopt(self) -> None:
        by_key = {c.key: c for c in [*self._pending, *self._waiting.values()]}
        adopted = set(self.executor.adopt(list(by_key.values())))
        if not adopted:
            return
        self._pending = deque(c for c in self._pending if c.key not in adopted)
        for key in adopted:
            self._waiting.pop(key, None)
            self._inflight[key] = by_key[key]
            self._attempts[key] = len(self.folder.attempts(by_key[key])) + 1

    def _submit(self, cell: Cell) -> None:
        attempt = self._attempts.get(cell.key, len(self.folder.attempts(cell))) + 1
        self._attempts[cell.key] = attempt
        config = cell_config(cell, self.spec, self.folder.cell_dir(cell))
        config.probe_models = False  # the preflight probed each model once
        self._inflight[cell.key] = cell
        resume = cell.key in self._to_resume  # once: a retry after a failed resume runs afresh
        self._to_resume.discard(cell.key)
        self.executor.submit(EpisodeJob(cell=cell, config=config, attempt=attempt, resume=resume))

    def _handle(self, update: JobUpdate) -> None:
        cell = self._inflight.get(update.key)
        if cell is None:
            return
        if update.kind == "queued":  # submitted; the scheduler has not started it yet
            self.status.queued_cell(cell.key, self._attempts.get(cell.key, 1))
            self.emit("cell_queued", **self._cell_data(cell), attempt=self._attempts.get(cell.key, 1),
                      **{k: v for k, v in update.detail.items() if k in ("job_id", "adopted", "state")})
        elif update.kind == "started":
            self.status.started_cell(cell.key, self._attempts.get(cell.key, 1))
            self.emit("cell_start", **self._cell_data(cell), attempt=self._attempts.get(cell.key, 1),
                      **{k: v for k, v in update.detail.items() if k in ("job_id", "adopted")})
        elif update.kind == "step":
            self.status.stepped(cell.key, update.step, update.cost_usd)
            self.emit("cell_step", cell=cell.key, step=update.step,
                      cost_usd=None if update.cost_usd is None else round(update.cost_usd, 6))
        elif update.kind == "finished":
            del self._inflight[cell.key]
            where = {k: update.detail[k] for k in ("host", "node", "job_id") if update.detail.get(k)}
            self._finished(cell, update.error, cancelled=bool(update.detail.get("cancelled")),
                           traceback=update.detail.get("traceback"), where=where)

    def _finished(self, cell: Cell, error: str | None, *, cancelled: bool = False,
                  traceback: str | None = None, where: dict[str, Any] | None = None) -> None:
        status = self.folder.state(cell)
        state = status.state
        if state is CellState.RUNNING:  # its job ended, so no one writes it any more
            state = CellState.LEFTOVER
        result = status.result
        base = {**self._cell_data(cell), "attempt": self._attempts.get(cell.key, 1), **(where or {})}
        if result is not None:
            base.update(status=result.status.value, metric=result.primary_metric,
                        score=(result.final_scores or {}).get(result.primary_metric or ""),
                        cost_usd=round(result.cost_usd or 0.0, 6), duration_s=result.duration_s,
                        steps=result.steps, error=result.error)
        elif error:
            base.update(status=None, error=error)
        if state is CellState.DONE:
            self.status.finished(cell.key, DONE, result)
            self.emit("cell_end", **base, outcome="done")
            return
        if self._stop_reason is not None or cancelled or state is CellState.INTERRUPTED:
            if self._stop_reason is not None:  # left for the next invocation to run again
                self.status.finished(cell.key, PENDING, result)
                self.status.rows[cell.key].state = PENDING
                self.emit("cell_end", **base, outcome="stopped")
                return
        # the infrastructure ended it (or it left no result): retry while allowed
        failures = self.folder.failed_attempts(cell) + self._session_failures.get(cell.key, 0)
        if failures < self.retry_errors:
            reason = f"failed-{result.status.value}" if result is not None else "failed-noresult"
            moved = self.folder.retire(cell, reason)
            if moved is None:  # nothing on disk records this failure: count it here
                self._session_failures[cell.key] = self._session_failures.get(cell.key, 0) + 1
            self.status.requeued(cell.key)
            self.emit("cell_end", **base, outcome="retry", traceback=traceback)
            self.emit("cell_retry", **self._cell_data(cell), attempt=self._attempts.get(cell.key, 1) + 1,
                      reason=base.get("error") or base.get("status"),
                      moved_to=None if moved is None else str(moved))
            self._pending.append(cell)
            return
        if state is CellState.LEFTOVER:  # no usable result: keep the attempt, but out of the scores
            self.folder.retire(cell, "failed-noresult")
        self.status.finished(cell.key, FAILED, result, error=base.get("error"))
        self.emit("cell_end", **base, outcome="failed", traceback=traceback)

    def _check_waiting(self) -> None:
        for key, cell in list(self._waiting.items()):
            status = self.folder.state(cell)
            if status.state is CellState.RUNNING:
                continue
            del self._waiting[key]
            if status.state is CellState.DONE:
                self.status.finished(key, DONE, status.result)
                self.emit("cell_end", **self._cell_data(cell), outcome="done", adopted=True,
                          status=status.result.status.value if status.result else None)
            elif self._stop_reason is None:
                reason = f"{status.state.value}-{status.detail}"
                if status.state is CellState.FAILED and self.folder.failed_attempts(cell) >= self.retry_errors:
                    self.status.finished(key, FAILED, status.result)
                    self.emit("cell_end", **self._cell_data(cell), outcome="failed", adopted=True)
                    continue
                moved = self.folder.retire(cell, reason if status.state is not CellState.FAILED
                                           else f"failed-{status.detail}")
                self.emit("cell_retired", **self._cell_data(cell), reason=reason, moved_to=str(moved))
                self.status.rows[key].state = PENDING
                self._pending.append(cell)

    executor_started = False


def sweep_dir_default(spec: SweepSpec) -> Path:
    """``sweeps/<name or matrix hash>``: the same command finds the same folder."""
    return Path("sweeps") / (spec.name or f"sweep-{spec.identity()}")


__all__ = ["EventSink", "Outcome", "Plan", "SweepEngine", "plan", "preflight_cells", "sweep_dir_default"]

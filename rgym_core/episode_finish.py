"""The end of an episode: the final grading, the workspace archive and the result.

:class:`EpisodeFinish` is the part of :class:`rgym_core.runner.Episode` that
grades: every ``validate`` during the loop (:meth:`EpisodeFinish._grade`, on a
frozen snapshot) and, once the loop ended, the final one: the processes still
running are killed, the whole workspace is copied out once and archived as
``workspace.tar.gz``, and that copy is graded (an *autosubmission* when the agent
did not submit).  :meth:`EpisodeFinish._finish` then stops the tools, removes the
sandbox, writes ``result.json`` and calls ``rgym_episode_end``.  A signal during
the final grading records the episode as ``ungraded`` (``rgym grade RUN_DIR``
grades it later).
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from rgym_core.agents import EpisodeStatus
from rgym_core.episode import EpisodeInfo, LifecycleHooks
from rgym_core.episode_plan import ProgressCallback, RunConfig
from rgym_core.grading import Grader
from rgym_core.records import EndReason, EpisodeResult, ExitStatus, ScoreRecord
from rgym_core.rundir import (
    WORKSPACE_ARCHIVE,
    TrajectoryWriter,
    archive_folder,
    archive_workspace,
    mount_excludes,
    write_result,
)
from rgym_core.sandbox import Sandbox, WorkspaceExportError
from rgym_core.snapshot import Snapshot, store_snapshot
from rgym_core.specs import PreparedDataset, TaskSpec
from rgym_core.tools import Tool, ToolContext


@contextmanager
def _shielded() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM while the result is being written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def _signal_name(exc: BaseException) -> str:
    text = str(exc)
    return text if text.startswith("SIG") else "SIGINT"


def final_status(record: ScoreRecord, end_reason: EndReason) -> tuple[ExitStatus, str | None]:
    """The status (and error) of an episode whose final grading gave ``record``."""
    if record.valid:
        if end_reason is EndReason.SUBMIT:
            return ExitStatus.SUBMITTED, None
        return ExitStatus.autosubmitted(end_reason), None
    missing = record.details.get("missing_submission")
    return (ExitStatus.SUBMISSION_MISSING if missing else ExitStatus.EVALUATION_ERROR), record.error


def grade_kind(end_reason: EndReason) -> str:
    """``submit`` when the agent submitted, else ``autosubmit``."""
    return "submit" if end_reason is EndReason.SUBMIT else "autosubmit"


def make_grader(task: TaskSpec, sandbox: Sandbox, datasets: dict[str, PreparedDataset], run_dir: Path,
                *, isolated: bool, seed: int | None, env: dict[str, str]) -> Grader:
    """The episode's grader, with ``env`` (the task's and its profile's) in the grader's environment."""
    return Grader(task, sandbox, datasets, run_dir, isolated=isolated, seed=seed, env=env)


class EpisodeFinish:
    """The grading and the end of :class:`rgym_core.runner.Episode` (a part of it:
    the attributes below are the episode's)."""

    config: RunConfig
    task: TaskSpec
    run_dir: Path
    progress: ProgressCallback
    status: EpisodeStatus
    tools: dict[str, Tool]
    writer: TrajectoryWriter
    hooks: LifecycleHooks
    info: EpisodeInfo | None
    grader: Grader
    scores: list[ScoreRecord]
    step_index: int
    completed_steps: int
    _sandbox: Sandbox | None
    _agent_error: str | None
    _kill_tried: bool
    _processes_stopped: bool
    _archived: bool
    _snapshot_error: str
    _temp_snapshots: list[Path]

    def _release_hidden(self) -> None:
        """Give back what the episode hid from an agent process (the episode's own)."""

    def _grade(self, kind: str, snapshot: Snapshot | None = None) -> ScoreRecord:
        """Grade one snapshot.  A ``validate`` takes its own: the agent's processes
        frozen for the copy, the copy kept in ``snapshots/`` by its digest."""
        self.progress("grading", {"kind": kind})
        if snapshot is None:
            snapshot = self._validate_snapshot()
        return self._keep_score(self.grader.grade(kind, self.step_index, snapshot))

    def _keep_score(self, record: ScoreRecord) -> ScoreRecord:
        self.scores.append(record)
        self.writer.score(record)
        return record

    def _snapshot_dir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="rgym-snapshot-")) / "workspace"

    def _validate_snapshot(self) -> Snapshot | None:
        dest = self._snapshot_dir()
        try:
            snap = self.grader.take_snapshot(dest, mode="freeze")
            store_snapshot(snap, self.run_dir)
        except (OSError, WorkspaceExportError, ValueError):
            shutil.rmtree(dest.parent, ignore_errors=True)
            return None  # the grader copies the workspace itself and reports the failure
        self._temp_snapshots.append(dest.parent)
        return snap

    def _stop_processes(self, why: str) -> list[str]:
        """Kill every process of the episode still running (at submit, at the end of
        a budget, before an archive) and name them in the trajectory."""
        if self._kill_tried or self._sandbox is None:
            return []
        self._kill_tried = True
        try:
            killed = self._sandbox.kill_processes()
        except NotImplementedError:
            return []
        except Exception as exc:  # noqa: BLE001 - the snapshot then says it was not killed
            self.writer.write("kill_error", {"error": f"{type(exc).__name__}: {exc}"})
            return []
        self._processes_stopped = True
        if killed:
            message = (f"killed {len(killed)} process{'es' if len(killed) != 1 else ''} still "
                       f"running at the {why}: " + "; ".join(killed[:5])
                       + (f"; and {len(killed) - 5} more" if len(killed) > 5 else ""))
            self.writer.write("processes_killed", {"when": why, "count": len(killed),
                                                   "commands": killed, "message": message})
            self.progress("processes_killed", {"message": message, "commands": killed})
        return killed

    def _final_snapshot(self, why: str) -> Snapshot | None:
        """Kill what still runs, copy the whole workspace (less the dataset mounts)
        once, and archive exactly that copy as ``workspace.tar.gz``."""
        assert self._sandbox is not None
        killed = self._stop_processes(why)
        dest = self._snapshot_dir()
        self._temp_snapshots.append(dest.parent)
        try:
            snap = self.grader.take_snapshot(dest, mode="none", full=True)
        except (OSError, WorkspaceExportError, ValueError) as exc:
            self.writer.write("archive_error", {"error": repr(exc)})
            self._snapshot_error = f"{type(exc).__name__}: {exc}"
            return None
        snap.info = attrs.evolve(snap.info, after_kill=self._processes_stopped, killed=killed)
        archive_folder(snap.path, self.run_dir / WORKSPACE_ARCHIVE)
        self._archived = True
        return snap

    def _final_grading(self, result: EpisodeResult, end_reason: EndReason) -> None:
        kind = grade_kind(end_reason)
        result.agent_error = self._agent_error
        why = "submission" if end_reason is EndReason.SUBMIT else f"end ({end_reason.value})"
        try:
            snapshot = self._final_snapshot(why)
            record = self._grade(kind, snapshot) if snapshot is not None else \
                self._grade_failed(kind)
        except KeyboardInterrupt as exc:
            name = _signal_name(exc)
            result.status = ExitStatus.UNGRADED
            result.error = (f"{name} stopped the grading of the {kind}; the workspace is kept in "
                            f"workspace.tar.gz: `rgym grade {self.run_dir}` grades it")
            self.writer.write("grading_interrupted", {"kind": kind, "signal": name,
                                                      "end_reason": end_reason.value})
            return
        result.status, result.error = final_status(record, end_reason)
        if record.valid:
            result.final_scores = dict(record.scores)
        if not self.config.archive_workspace and self._archived:
            (self.run_dir / WORKSPACE_ARCHIVE).unlink(missing_ok=True)  # graded: not kept
            self._archived = False

    def _grade_failed(self, kind: str) -> ScoreRecord:
        """The final record when the workspace could not be copied out."""
        return self._keep_score(ScoreRecord(
            step=self.step_index, kind=kind, valid=False,
            error=f"could not collect the submission: {self._snapshot_error}"))

    def _finish(self, sandbox: Sandbox | None, ctx: ToolContext | None, result: EpisodeResult) -> None:
        result.scores = list(self.scores)
        result.steps = self.completed_steps
        usage = self.status.usage
        result.cost_usd = round(usage.cost_usd, 6)
        result.input_tokens = usage.input_tokens
        result.output_tokens = usage.output_tokens
        result.model_retries = usage.retries
        if ctx is not None:
            for tool in self.tools.values():
                ctx.tool_config = self.task.tool_config.get(tool.namespace, {})
                try:
                    tool.stop(ctx)
                except Exception as exc:  # noqa: BLE001
                    self.writer.write("hook_error", {"tool": tool.qualified_name, "error": repr(exc)})
        if sandbox is not None:
            if not self._archived and (self.config.archive_workspace
                                       or result.status is ExitStatus.UNGRADED):
                self._stop_processes(f"end ({result.status.value})")
                try:
                    archive_workspace(sandbox, self.run_dir,
                                      exclude=mount_excludes(m.mount for m in self.task.datasets))
                except Exception as exc:  # noqa: BLE001
                    self.writer.write("archive_error", {"error": repr(exc)})
            for folder in self._temp_snapshots:
                shutil.rmtree(folder, ignore_errors=True)
            try:
                sandbox.cleanup()
            except Exception as exc:  # noqa: BLE001
                self.writer.write("cleanup_error", {"error": repr(exc)})
            if self.info is not None:
                self.info.sandbox_handle = None  # removed: plugins read workspace.tar.gz now
        grader = getattr(self, "grader", None)
        try:
            if grader is not None and hasattr(grader, "close"):
                grader.close()  # gives hidden files closed for the episode their modes back
            self._release_hidden()
        except Exception as exc:  # noqa: BLE001
            self.writer.write("cleanup_error", {"error": repr(exc)})
        result.ended_at = time.time()
        result.duration_s = round(result.ended_at - result.started_at, 3)
        write_result(self.run_dir, result)
        if self.info is not None:
            before = json.dumps(result.extras, sort_keys=True, default=str)
            self.hooks.call("rgym_episode_end", episode=self.info, result=result)
            if json.dumps(result.extras, sort_keys=True, default=str) != before:
                write_result(self.run_dir, result)  # what plugins added under result.extras
        self.writer.end(result)
        self.writer.close()
        self.progress("end", {"result": result})


__all__ = ["EpisodeFinish", "final_status", "grade_kind", "make_grader"]

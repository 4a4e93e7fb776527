"""Finishing run directories that an interruption left without a score.

:func:`finish_run` is what ``rgym grade RUN_DIR`` does for one run directory:

* ``ungraded`` (a signal stopped the final grading): grade the archived
  workspace (``workspace.tar.gz``) as the submission or autosubmission the
  episode ended with, and rewrite ``result.json`` with the score;
* *incomplete* (no ``result.json``: the process was killed): rebuild the result
  from ``config.json`` and the trajectory (steps, validation scores, cost), archive
  the workspace the killed run left on this host when it is still there, grade it
  (status ``autosubmitted_killed``), or, without a workspace, record the run as an
  ``error`` whose validation scores are kept;
* a complete run is left alone unless ``regrade`` is asked for.

Grading runs on the host, from a clean copy of the archive, with the task's
grader (the task's pack must be installed); the trajectory gets the new ``score``
and ``end`` records.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import define

from rgym_core.records import (
    EndReason,
    EpisodeResult,
    ExitStatus,
    IsolationInfo,
    ScoreRecord,
    Usage,
)
from rgym_core.registry import Registry, RegistryError, load_registry
from rgym_core.rundir import (
    WORKSPACE_ARCHIVE,
    RunDir,
    RunState,
    TrajectoryWriter,
    archive_folder,
    mount_excludes,
    write_result,
)
from rgym_core.sandbox import DEFAULT_OUTPUT_LIMIT, ExecResult, Sandbox, WorkspaceLayout
from rgym_core.serialization import SpecError, structure
from rgym_core.snapshot import restore_snapshot
from rgym_core.workspace_export import ExportReport, extract_archive

__all__ = ["FinishOutcome", "FolderWorkspace", "GradeError", "finish_run"]


class GradeError(RuntimeError):
    """A run directory cannot be graded (no task, no workspace, still running...);
    the message says why and what to do."""


@define
class FinishOutcome:
    """What :func:`finish_run` did: ``graded``, ``finished`` (recorded without a
    grading: no workspace) or ``skipped``; the new result when there is one."""

    path: Path
    action: str
    message: str
    result: EpisodeResult | None = None


class FolderWorkspace(Sandbox):
    """A host folder standing in for a finished episode's sandbox, so the grader can
    copy the submission out of it.  Read-only: it runs no commands but ``ls``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.workspace = str(self.root)

    def start(self, layout: WorkspaceLayout) -> None:  # pragma: no cover - never started
        raise NotImplementedError("an archived workspace is not started")

    def run(self, command: str, *, timeout: float | None = None,
            output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        raise NotImplementedError("an archived workspace runs no commands")

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, input: str | None = None,
             output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        if list(argv) in (["ls", "-A1"], ["ls", "-A"]):
            names = sorted(p.name for p in self.root.iterdir())
            return ExecResult(exit_code=0, output="\n".join(names) + ("\n" if names else ""))
        raise NotImplementedError("an archived workspace runs no commands")

    def _inside(self, path: str) -> Path:
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root.resolve()):
            raise PermissionError(f"{path}: outside the workspace")
        return target

    def read_file(self, path: str) -> bytes:
        return self._inside(path).read_bytes()

    def write_file(self, path: str, data: bytes | str) -> None:
        raise PermissionError("an archived workspace is read-only")

    def copy_in(self, src: Path, dest: str) -> None:
        raise PermissionError("an archived workspace is read-only")

    def copy_out(self, src: str, dest: Path) -> None:
        source = self.root / src
        if source.is_symlink() or not source.is_dir():
            shutil.copy2(source, dest, follow_symlinks=False)
        else:
            shutil.copytree(source, dest, symlinks=True)

    def export_workspace(self, dest: Path, *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None,
                         quota_bytes: int | None = None) -> ExportReport:
        """Copy the folder out as every backend does: one tar stream, extracted with
        the hostile-archive rules of :mod:`rgym_core.workspace_export`."""
        with tempfile.TemporaryFile() as stream:
            with tarfile.open(fileobj=stream, mode="w") as tar:
                tar.add(self.root, arcname=".")
            stream.seek(0)
            return extract_archive(stream, Path(dest), exclude=exclude, include=include,
                                   quota_bytes=quota_bytes)

    def cleanup(self) -> None:
        return None


def _config_of(run: RunDir) -> tuple[dict[str, Any], Any]:
    """``config.json`` and the :class:`~rgym_core.runner.RunConfig` it recorded."""
    from rgym_core.runner import RunConfig

    config = run.config()
    raw = config.get("run")
    if not isinstance(raw, dict):
        raise GradeError(f"{run.config_path}: no 'run' section; not written by `rgym run`")
    try:
        run_config = structure(raw, RunConfig, str(run.config_path), strict=False)
    except SpecError as exc:
        raise GradeError(str(exc)) from None
    return config, run_config


def _rebuild(run: RunDir) -> EpisodeResult:
    """The result of a run that died without writing one, from what it left."""
    config = run.config()
    ident = run.identity()
    task: dict[str, Any] = config["task"] if isinstance(config.get("task"), dict) else {}
    metrics = [m for m in task.get("metrics", []) if isinstance(m, dict)]
    primary = next((m for m in metrics if m.get("primary")), metrics[0] if metrics else {})
    baseline: dict[str, Any] = task["baseline"] if isinstance(task.get("baseline"), dict) else {}
    started = float(run.start_record().get("started_at") or 0.0)
    usage = Usage()
    steps = 0
    for step in run.steps():
        steps = max(steps, step.index)
        usage.add(step.action.usage)
    ended = run.trajectory_path.stat().st_mtime if run.trajectory_path.exists() else time.time()
    raw = {
        "run_id": ident.get("run_id") or run.path.name, "task_id": ident.get("task") or "?/?",
        "agent": ident.get("agent") or "?", "model": ident.get("model"),
        "sandbox": config.get("sandbox", "local"), "seed": ident.get("seed"),
        "status": ExitStatus.ERROR.value, "primary_metric": primary.get("name"),
        "direction": primary.get("direction", "maximize"),
        "metrics": {m["name"]: m.get("direction", "maximize") for m in metrics if "name" in m},
        # as the runner records it: never a figure measured on a test fixture
        "baseline_scores": {} if baseline.get("measured_on") == "fixture" else baseline.get("scores") or {},
        "reference_scores": task.get("reference_scores") or {},
        "subtasks": task.get("subtasks") or [], "profile": ident.get("profile"),
        "started_at": started, "run_dir": str(run.path),
        "tags": (config.get("run") or {}).get("tags") or {},
    }
    result = structure(raw, EpisodeResult, str(run.config_path), strict=False)
    result.scores = run.scores()
    result.steps = steps
    result.cost_usd = round(usage.cost_usd, 6)
    result.input_tokens, result.output_tokens = usage.input_tokens, usage.output_tokens
    result.end_reason = EndReason.KILLED
    result.ended_at = ended
    result.duration_s = round(max(0.0, ended - started), 3) if started else 0.0
    return result


def _sandbox_record(run: RunDir) -> dict[str, Any]:
    """The trajectory's last ``sandbox`` record (a resumed run has one per sandbox)."""
    records = [r for r in run.records() if r.get("type") == "sandbox"]
    return records[-1] if records else {}


def reap_leftovers(run: RunDir, registry: Registry) -> list[str]:
    """Kill whatever a killed run's episode still runs (its uid, pid namespace or
    container: the backend's :attr:`~rgym_core.sandbox.SandboxSpec.reap`), so nothing
    changes its workspace after the snapshot; return the command lines killed."""
    handle, spec = _backend_of(run, registry)
    if handle is None or spec is None or spec.reap is None:
        return []
    return list(spec.reap(handle))


def _backend_of(run: RunDir, registry: Registry) -> tuple[dict[str, Any] | None, Any]:
    """A killed run's reap handle and the registered backend that wrote it (None for
    either when the trajectory has none or the backend is not installed)."""
    record = _sandbox_record(run)
    handle = record.get("reap")
    if not isinstance(handle, dict) or not handle:
        return None, None
    try:
        return handle, registry.sandbox(str(record.get("backend") or ""))
    except (RegistryError, KeyError):
        return handle, None


def _archive_leftover(run: RunDir, mounts: list[str], registry: Registry | None = None) -> bool:
    """Archive the workspace a killed run left: a host folder, or (a container's)
    through the backend's ``export_leftover``; True when done."""
    folder = _sandbox_record(run).get("host_workspace")
    if folder and Path(folder).is_dir() and not Path(folder).is_symlink():
        archive_folder(Path(folder), run.archive_path, exclude=mount_excludes(mounts))
        return True
    if registry is None:
        return False
    handle, spec = _backend_of(run, registry)
    if handle is None or spec is None or spec.export_leftover is None:
        return False
    with tempfile.TemporaryDirectory(prefix="rgym-leftover-") as tmp:
        dest = Path(tmp) / "workspace"
        spec.export_leftover(handle, dest, mount_excludes(mounts))
        dest.mkdir(exist_ok=True)
        archive_folder(dest, run.archive_path)
    return True


def _grade_archive(run: RunDir, result: EpisodeResult, kind: str,
                   registry: Registry, *, killed: list[str] | None = None) -> ScoreRecord:
    """Grade ``run``'s ``workspace.tar.gz`` with the task's grader, and record in
    ``result.isolation.grading`` how that grading was confined.  The archive is the
    snapshot graded: its digest is the record's ``snapshot.sha256``; ``killed`` (a
    killed run's leftovers, killed first) makes it a snapshot taken after a kill."""
    from rgym_core.runner import RunError, make_grader, profile_env, resolve_datasets

    _, run_config = _config_of(run)
    try:
        task = registry.task(result.task_id)
    except RegistryError as exc:
        raise GradeError(f"{run.path}: {exc}") from None
    try:
        task = task.with_profile(result.profile)
    except ValueError as exc:
        raise GradeError(f"{run.path}: {exc}") from None
    try:
        datasets = resolve_datasets(registry, task, run_config)
    except (RunError, RegistryError, ValueError, OSError) as exc:
        raise GradeError(f"{run.path}: the task's datasets: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="rgym-grade-") as tmp:
        snapshot = restore_snapshot(run.archive_path, Path(tmp) / "workspace")
        if killed is not None:
            snapshot.info = attrs.evolve(snapshot.info, after_kill=True, killed=killed)
        grader = make_grader(task, FolderWorkspace(snapshot.path), datasets, run.path,
                             isolated=False, seed=run_config.grader_seed, env=profile_env(task))
        if result.isolation is None:  # a rebuilt result: only the asked agent isolation is known
            result.isolation = IsolationInfo(agent=run_config.agent_isolation)
        result.isolation.grading = grader.confinement
        return grader.grade(kind, result.steps, snapshot)


def _run_graded_hooks(run: RunDir, result: EpisodeResult, registry: Registry) -> None:
    """Call ``rgym_run_graded`` on the run just graded or finished (the integrity
    monitor writes ``integrity.json`` there), through the registry as the runner calls
    the lifecycle hooks: a failing implementation is a warning.  ``result.json`` is
    written again when an implementation added to ``result.extras``."""
    import json

    before = json.dumps(result.extras, sort_keys=True, default=str)
    registry.call_hook("rgym_run_graded", run_dir=run.path, result=result)
    if json.dumps(result.extras, sort_keys=True, default=str) != before:
        write_result(run.path, result)


def finish_run(path: Path | str, registry: Registry | None = None, *,
               regrade: bool = False) -> FinishOutcome:
    """Grade or finish one run directory (see the module docstring).  Raises
    :class:`GradeError` (or :class:`~rgym_core.rundir.RunDirError`) naming the run."""
    from rgym_core.runner import final_status, grade_kind

    run = RunDir(Path(path))
    state = run.state()
    killed: list[str] = []
    leftover_error: str | None = None
    if state is RunState.RUNNING:
        owner = run.owner()
        where = f"process {owner.pid} on {owner.host}" if owner else "its process"
        raise GradeError(f"{run.path}: still running ({where}); wait for it, or stop it first")
    if state is RunState.COMPLETE:
        result = run.result()
        if result.status is not ExitStatus.UNGRADED and not regrade:
            return FinishOutcome(run.path, "skipped", f"already {result.status.value}", result)
        end_reason = result.end_reason or EndReason.SUBMIT
    else:
        if state is RunState.CORRUPT:
            run.result_path.replace(run.path / "result.json.corrupt")
        result = _rebuild(run)
        end_reason = EndReason.KILLED
        registry = registry or load_registry()
        killed = reap_leftovers(run, registry)
        if not run.archive_path.exists():
            try:
                mounts = [str(m.get("mount", "data")) for m in
                          (run.config().get("task") or {}).get("datasets", []) if isinstance(m, dict)]
                _archive_leftover(run, mounts, registry)
            except Exception as exc:  # noqa: BLE001 - then there is nothing to grade, said below
                leftover_error = f"{type(exc).__name__}: {exc}"[:500]
    kind = grade_kind(end_reason)
    registry = registry or load_registry()
    with TrajectoryWriter(run.path) as writer:
        if writer.repaired is not None:
            writer.write("repaired", {"cut": writer.repaired[:200]})
        if leftover_error is not None:
            writer.write("archive_error", {"error": leftover_error, "by": "rgym grade"})
        if killed:
            writer.write("processes_killed", {
                "when": "rgym grade", "count": len(killed), "commands": killed,
                "message": f"killed {len(killed)} process{'es' if len(killed) != 1 else ''} "
                           "the killed run left running: " + "; ".join(killed[:5])})
        if not run.archive_path.exists():
            result.status = ExitStatus.ERROR
            result.error = ("the rgym process was killed before it archived the workspace, and "
                            "the workspace is gone: nothing to grade (validation scores kept)")
            result.extras["rgym_grade"] = {"at": time.time(), "graded": False}
            write_result(run.path, result)
            writer.end(result)
            _run_graded_hooks(run, result, registry)
            return FinishOutcome(run.path, "finished", result.error, result)
        record = _grade_archive(run, result, kind, registry,
                                killed=None if state is RunState.COMPLETE else killed)
        writer.score(record)
        earlier = list(result.scores)
        previous = None
        if earlier and earlier[-1].kind in ("submit", "autosubmit"):
            previous = earlier.pop()  # a regrade replaces the final grading, adds no attempt
        result.scores = [*earlier, record]
        result.status, result.error = final_status(record, end_reason)
        result.final_scores = dict(record.scores) if record.valid else None
        result.extras["rgym_grade"] = {"at": time.time(), "graded": True, "kind": kind,
                                       "from": WORKSPACE_ARCHIVE}
        if previous is not None and previous.snapshot is not None and record.snapshot is not None:
            # The archive is the snapshot the episode graded, or it was changed since.
            result.extras["rgym_grade"]["snapshot_matches"] = (
                previous.snapshot.sha256 == record.snapshot.sha256)
            result.extras["rgym_grade"]["previous_scores"] = dict(previous.scores)
        write_result(run.path, result)
        writer.end(result)
    _run_graded_hooks(run, result, registry)
    score = (f"{result.primary_metric} = {result.primary_score:.4g}"
             if result.primary_score is not None else f"no score ({record.error})")
    return FinishOutcome(run.path, "graded", f"{result.status.value}: {score}", result)

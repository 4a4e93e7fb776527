"""Continuing an interrupted episode: ``rgym run --resume RUN_DIR``.

An episode that ended by a crash, ``kill -9``, a reboot (no ``result.json``) or a
signal (``result.json`` says ``cancelled``) goes on in the same run directory:

* the **workspace** is the one the interrupted run left: the live host folder its
  sandbox record names (``host_workspace``, after the leftover processes are
  killed as ``rgym grade`` kills them), else the container's, exported through the
  backend's ``export_leftover``, else the ``workspace.tar.gz`` a cancelled run
  archived.  The dataset mounts are left out and laid out again.  Validate
  snapshots (``snapshots/``) are not used: they are older than the last steps.
  Whatever the step that was running when the run died had already changed stays
  (that step is not recorded and is asked of the agent again);
* the **budget already spent** is kept: the completed steps count against
  ``max_steps``, the model usage of their actions against the cost and token
  limits, and the ``elapsed_s`` of the last completed step against the time limit
  (the time between that step and the interruption is not counted);
* the **agent** is built and started as before, then its ``resume(steps, state)``
  puts it after the recorded steps (:class:`~rgym_core.agents.ResumableAgent`);
* ``result.json`` lists every resume (:class:`~rgym_core.records.ResumeRecord`);
  the trajectory gets a ``resume`` record and goes on with the next step.

:func:`plan_resume` checks all this before anything changes and raises
:class:`ResumeError`, one line naming the file, the field and the fix.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.records import ExitStatus, ResumeRecord, ScoreRecord, Step, Usage
from rgym_core.registry import Registry
from rgym_core.rundir import (
    WORKSPACE_ARCHIVE,
    RunDir,
    RunDirError,
    RunState,
    archive_folder,
    extract_workspace,
    iter_records,
    mount_excludes,
)
from rgym_core.serialization import SpecError, structure

__all__ = ["ResumeError", "ResumePlan", "plan_resume", "resume_episode"]


class ResumeError(ValueError):
    """A run directory cannot be resumed; the message says which file and field,
    and what to do."""


@define
class ResumePlan:
    """What :func:`plan_resume` read from an interrupted run directory."""

    run_dir: Path
    #: ``config.json`` as written (its ``owner`` is replaced when the run goes on).
    config_data: dict[str, Any]
    #: The recorded :class:`~rgym_core.runner.RunConfig`, writing into ``run_dir``.
    run_config: Any
    run_id: str
    started_at: float
    steps: list[Step]
    #: The ``agent_state`` stored with the last step (``None`` without one).
    agent_state: Any
    scores: list[ScoreRecord]
    usage: Usage
    elapsed_s: float
    previous: str
    resumes: list[ResumeRecord] = field(factory=list)
    #: ``host``: the live host folder; ``export``: the backend's leftover;
    #: ``archive``: the cancelled run's ``workspace.tar.gz``.
    workspace_source: str = ""
    host_workspace: Path | None = None

    @property
    def from_step(self) -> int:
        return self.steps[-1].index if self.steps else 0

    def restore_workspace(self, registry: Registry, mounts: list[str]) -> Path:
        """Kill what the interrupted run left running, then copy its workspace (less
        the dataset ``mounts``) into a new host folder and return it (the caller
        removes its parent).  The copy goes through an archive, so the
        hostile-archive rules apply."""
        return _restore_workspace(self, registry, mounts)

    def record(self) -> ResumeRecord:
        """The :class:`~rgym_core.records.ResumeRecord` of this resume (now)."""
        return ResumeRecord(at=time.time(), from_step=self.from_step, previous=self.previous,
                            workspace=self.workspace_source)


def _fail(path: Path, where: str, message: str) -> ResumeError:
    return ResumeError(f"{path}: {where}: {message}" if where else f"{path}: {message}")


def _last_sandbox_record(run: RunDir) -> dict[str, Any]:
    records = [r for r in run.records() if r.get("type") == "sandbox"]
    return records[-1] if records else {}


def plan_resume(run_dir: Path | str, registry: Registry) -> ResumePlan:
    """Read and check the interrupted run ``run_dir``; raise :class:`ResumeError` when
    it cannot go on (not a run directory, still running, already finished, written
    by another kind of run, no workspace left).  Changes nothing on disk."""
    from rgym_core.runner import RunConfig

    run = RunDir(Path(run_dir))
    if not run.path.is_dir():
        raise _fail(run.path, "", "no such run directory; give the folder `rgym run` printed")
    if not run.config_path.is_file():
        raise _fail(run.config_path, "", "file not found: not a run directory of `rgym run`, "
                                         "nothing to resume")
    if not run.trajectory_path.is_file():
        raise _fail(run.trajectory_path, "", "file not found: the run never started its "
                                             "episode; start a new one with `rgym run TASK`")
    state = run.state()
    previous = "killed"
    if state is RunState.RUNNING:
        owner = run.owner()
        where = f"process {owner.pid} on {owner.host}" if owner else "its process"
        raise _fail(run.config_path, "owner", f"the run is still going ({where}); wait for "
                                              "it, or stop it first")
    if state is RunState.CORRUPT:
        raise _fail(run.result_path, "", "cannot be read; move it away to resume the run "
                                         "as a killed one")
    if state is RunState.COMPLETE:
        result = run.result()
        if result.status is ExitStatus.UNGRADED:
            raise _fail(run.result_path, "status", "ungraded: the episode ended and only its "
                                                   f"grading was stopped; `rgym grade {run.path}` "
                                                   "grades it")
        if result.status is not ExitStatus.CANCELLED:
            raise _fail(run.result_path, "status", f"{result.status.value}: the episode already "
                                                   "finished; only a killed or cancelled run can "
                                                   "be resumed (start a new one with `rgym run`)")
        previous = "cancelled"
    try:
        config = run.config()
    except RunDirError as exc:
        raise ResumeError(str(exc)) from None
    raw = config.get("run")
    if not isinstance(raw, dict):
        raise _fail(run.config_path, "run", "missing: not written by `rgym run`, cannot be "
                                            "resumed")
    try:
        run_config = structure({**raw, "run_dir": str(run.path)}, RunConfig,
                               str(run.config_path), strict=False)
    except SpecError as exc:
        raise ResumeError(str(exc)) from None
    if run_config.agent_isolation != "none":
        raise _fail(run.config_path, "run.agent_isolation",
                    f"{run_config.agent_isolation}: an agent in its own process cannot be "
                    "resumed yet; start a new run")
    steps: list[Step] = []
    agent_state: Any = None
    scores: list[ScoreRecord] = []
    resumes: list[ResumeRecord] = []
    start: dict[str, Any] = {}
    try:
        for record in iter_records(run.trajectory_path):
            kind = record.get("type")
            if kind == "start" and not start:
                start = record
            elif kind == "step":
                step = structure(record.get("step"), Step, str(run.trajectory_path), strict=False)
                steps.append(step)
                agent_state = record.get("agent_state")
            elif kind == "score":
                scores.append(structure(record.get("score"), ScoreRecord,
                                        str(run.trajectory_path), strict=False))
            elif kind == "resume":
                resumes.append(structure(record.get("resume"), ResumeRecord,
                                         str(run.trajectory_path), strict=False))
    except (RunDirError, SpecError) as exc:
        raise ResumeError(str(exc)) from None
    if not start:
        raise _fail(run.trajectory_path, "start", "no start record: not written by `rgym run`")
    usage = Usage()
    for step in steps:
        usage.add(step.action.usage)
    plan = ResumePlan(
        run_dir=run.path, config_data={k: v for k, v in config.items() if k != "owner"},
        run_config=run_config, run_id=str(config.get("run_id") or start.get("run_id") or ""),
        started_at=float(start.get("started_at") or 0.0), steps=steps,
        agent_state=agent_state if steps else None, scores=scores, usage=usage,
        elapsed_s=float(steps[-1].elapsed_s) if steps else 0.0, previous=previous,
        resumes=resumes)
    _find_workspace(run, plan, registry)
    return plan


def _find_workspace(run: RunDir, plan: ResumePlan, registry: Registry) -> None:
    """Choose where the workspace comes from (see the module docstring)."""
    from rgym_core.grade_runs import _backend_of

    sandbox = _last_sandbox_record(run)
    folder = sandbox.get("host_workspace")
    if plan.previous == "killed":
        if folder and Path(folder).is_dir() and not Path(folder).is_symlink():
            plan.workspace_source, plan.host_workspace = "host", Path(folder)
            return
        handle, spec = _backend_of(run, registry)
        if handle is not None and spec is not None and spec.export_leftover is not None:
            plan.workspace_source = "export"
            return
        if run.archive_path.is_file():
            plan.workspace_source = "archive"
            return
        where = f"'{folder}' is gone" if folder else "no host folder recorded"
        raise _fail(run.trajectory_path, "sandbox.host_workspace",
                    f"{where} and there is no {WORKSPACE_ARCHIVE}: the workspace did not survive "
                    f"(a reboot?); `rgym grade {run.path}` records the run as it stands")
    if not run.archive_path.is_file():
        raise _fail(run.archive_path, "", "file not found: the cancelled run kept no workspace "
                                          "(--no-archive?), so it cannot go on")
    plan.workspace_source = "archive"


def _restore_workspace(plan: ResumePlan, registry: Registry, mounts: list[str]) -> Path:
    from rgym_core.grade_runs import _backend_of, reap_leftovers

    run = RunDir(plan.run_dir)
    reap_leftovers(run, registry)
    tmp = Path(tempfile.mkdtemp(prefix="rgym-resume-"))
    dest = tmp / "workspace"
    try:
        if plan.workspace_source == "host":
            assert plan.host_workspace is not None
            archive = tmp / WORKSPACE_ARCHIVE
            archive_folder(plan.host_workspace, archive, exclude=mount_excludes(mounts))
            extract_workspace(archive, dest)
            archive.unlink()
        elif plan.workspace_source == "export":
            handle, spec = _backend_of(run, registry)
            assert handle is not None and spec is not None
            spec.export_leftover(handle, dest, mount_excludes(mounts))
            dest.mkdir(exist_ok=True)
        else:
            extract_workspace(run.archive_path, dest)
            for mount in mount_excludes(mounts):
                if "*" not in mount:
                    shutil.rmtree(dest / mount, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def resume_episode(run_dir: Path | str, registry: Registry | None = None, *,
                   progress: Any = None) -> Any:
    """Continue the interrupted (killed or cancelled) episode of ``run_dir`` in that
    directory, with the settings it recorded, and return its
    :class:`~rgym_core.records.EpisodeResult`.  Raises
    :class:`~rgym_core.runner.RunError`, one line naming the file, field and fix, when
    it cannot go on; nothing on disk changes then."""
    from rgym_core.registry import load_registry
    from rgym_core.runner import Episode, RunError

    registry = registry or load_registry()
    try:
        plan = plan_resume(run_dir, registry)
    except ResumeError as exc:
        raise RunError(str(exc)) from None
    episode = Episode(plan.run_config, registry, progress=progress, resume=plan)
    recorded = plan.config_data.get("agent")
    if recorded and recorded != episode.agent_name:
        raise RunError(f"{plan.run_dir / 'config.json'}: agent: the run used '{recorded}', "
                       f"which resolves to '{episode.agent_name}' here; install the agent it used")
    return episode.run()

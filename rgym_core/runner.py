"""The episode runner: plan, lay out, loop agent -> tool -> observation, grade, record.

:func:`run_episode` is the whole life of one episode, in three phases that
:class:`Episode` wires together:

1. *plan and pre-flight* (:mod:`rgym_core.episode_plan`, :func:`preflight`):
   resolve the task (and its profile), agent, sandbox backend, datasets and tools
   from the registry, merge the budget and, once, the sandbox's effective resources
   (``Episode.resources``, which every backend reads), build the agent and check its
   model clients (a price for a cost limit, a server that answers, a key).  Anything
   wrong here raises :class:`RunError` (``rgym run`` exits 2) and no run directory is
   created;
2. create the run directory (:mod:`rgym_core.rundir`), write ``config.json`` and
   start the sandbox with the starter files and read-only datasets;
3. *the loop* (:mod:`rgym_core.episode_loop`): ask the agent for actions and run
   each through its tool (the shell is the ``bash`` tool) until the agent submits, a
   budget ends (steps, wall-clock, cost, tokens) or the agent fails; every step is
   appended to ``trajectory.jsonl`` as it happens, and the lifecycle hooks of every
   plugin are called through pluggy (:class:`~rgym_core.episode.LifecycleHooks`);
4. *the finish* (:mod:`rgym_core.episode_finish`): grade the final workspace from a
   clean copy (an *autosubmission* when the agent did not submit) and write
   ``result.json`` and ``workspace.tar.gz``.

SIGINT and SIGTERM end the episode with status ``cancelled``: the trajectory
so far and a result are still written and the sandbox is removed.  A cancelled or
killed episode goes on with :func:`rgym_core.resume.resume_episode` (``rgym run
--resume``), which gives :class:`Episode` the plan it read from the run directory.  A signal
during the final grading stops the grader and records the episode as
``ungraded``; its workspace is archived, and ``rgym grade RUN_DIR`` grades it.
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any

import attrs

from rgym_core import __version__
from rgym_core.agents import Agent, AgentConfig, AgentSpec, EpisodeStatus
from rgym_core.datasets import DatasetError, starter_folders, workspace_starter
from rgym_core.episode import EpisodeInfo, LifecycleHooks
from rgym_core.episode_finish import (
    EpisodeFinish,
    _shielded,
    _signal_name,
    final_status,
    grade_kind,
    make_grader,
)
from rgym_core.episode_loop import AGENT_CAUSED, EpisodeLoop, _AgentLoop, _signals_as_interrupt
from rgym_core.episode_plan import (
    PROFILE_ENV,
    EpisodePlan,
    ProgressCallback,
    RunConfig,
    RunError,
    check_devices,
    plan_episode,
    profile_env,
    resolve_datasets,
    sandbox_config,
    select_tools,
    with_tool_options,
)
from rgym_core.isolation.hiding import (
    HiddenFromOthers,
    agent_process_reads_host_files,
    hide_task_files,
)
from rgym_core.models import ModelRequirements, check_model_client, model_clients_of
from rgym_core.records import EndReason, EpisodeResult, ExitStatus, IsolationInfo, ScoreRecord
from rgym_core.registry import Registry, RegistryError, load_registry
from rgym_core.rundir import (
    WORKSPACE_ARCHIVE,
    TrajectoryWriter,
    create_run_dir,
    run_dir_path,
    write_config,
)
from rgym_core.sandbox import EffectiveResources, Sandbox, WorkspaceLayout
from rgym_core.serialization import unstructure
from rgym_core.specs import Budget, PreparedDataset, TaskSpec
from rgym_core.tools import Tool, ToolContext


class Episode(EpisodeLoop, EpisodeFinish):
    """One running episode.  Most users call :func:`run_episode` instead.

    The constructor plans the episode (:func:`~rgym_core.episode_plan.plan_episode`);
    :meth:`prepare` does every check that can fail before the run directory
    exists (it raises :class:`RunError`); :meth:`run` calls it first, then the
    loop (:class:`~rgym_core.episode_loop.EpisodeLoop`) and the finish
    (:class:`~rgym_core.episode_finish.EpisodeFinish`).
    """

    def __init__(self, config: RunConfig, registry: Registry, *, agent: Agent | None = None,
                 progress: ProgressCallback | None = None,
                 resume: Any = None) -> None:
        self.config = config
        #: A :class:`rgym_core.resume.ResumePlan` when the episode continues an
        #: interrupted run (``rgym run --resume``), else None.
        self.resume = resume
        self.registry = registry
        self.progress = progress or (lambda event, data: None)
        plan = plan_episode(config, registry, agent=agent, resume=resume)
        #: What the episode will be (:class:`~rgym_core.episode_plan.EpisodePlan`).
        self.plan: EpisodePlan = plan
        self.sandbox_name = plan.sandbox_name
        self.task: TaskSpec = plan.task
        self.profile: str | None = plan.profile
        self.agent_spec: AgentSpec | None = plan.agent_spec
        self.agent_registration = plan.agent_registration
        self.agent_name = plan.agent_name
        self._agent = agent
        self.budget: Budget = plan.budget
        #: The sandbox's resources, merged once; the backend reads them as
        #: ``SandboxConfig.effective``.
        self.resources: EffectiveResources = plan.resources
        self.run_id = plan.run_id
        self.status = EpisodeStatus(budget=self.budget)
        self.scores: list[ScoreRecord] = []
        self.state: dict[str, Any] = {}
        self.step_index = 0
        self.completed_steps = 0
        self._agent_error: str | None = None
        self._pending_info: dict[str, Any] = {}
        self._prepared: tuple[list[Tool], dict[str, PreparedDataset], Agent] | None = None
        self._hidden: HiddenFromOthers | None = None
        self._agent_closed = False
        self._sandbox: Sandbox | None = None
        self._kill_tried = False
        self._processes_stopped = False
        self._archived = False
        self._snapshot_error = ""
        self._temp_snapshots: list[Path] = []
        self._state_failed = False
        self._resumed: Any = None
        self._loop = _AgentLoop()
        self.run_dir = plan.run_dir

    @property
    def agent(self) -> Agent | None:
        """The agent :meth:`prepare` built (None before it, and after :meth:`close`)."""
        return self._prepared[2] if self._prepared is not None else None

    # -- pre-flight -------------------------------------------------------------

    def prepare(self) -> None:
        """Resolve tools and datasets, build the agent and check its model clients.
        Raises :class:`RunError` with the fix; creates nothing on disk but caches."""
        if self._prepared is not None:
            return
        try:
            tools = select_tools(self.registry, self.task, self.config.tools)
        except RegistryError as exc:
            raise RunError(str(exc)) from None
        try:
            datasets = resolve_datasets(self.registry, self.task, self.config)
            starter_folders(self.task, datasets)  # a dataset's starter folder exists
        except (DatasetError, RegistryError) as exc:
            raise RunError(str(exc)) from None
        if self._hidden is None and agent_process_reads_host_files(self.config.agent_isolation):
            self._hidden = hide_task_files(self.task, datasets)  # before the scaffold starts
        agent = self._make_agent()
        try:
            self._check_models(agent)
        except BaseException:
            self._close_agent(agent)
            self._release_hidden()
            raise
        self._prepared = (tools, datasets, agent)

    def _check_models(self, agent: Agent) -> None:
        needs = ModelRequirements(cost_limit_usd=self.budget.cost_limit_usd,
                                  token_limit=self.budget.token_limit,
                                  probe=self.config.probe_models)
        for client in model_clients_of(agent):
            try:
                check_model_client(client, needs)
            except (ValueError, LookupError, OSError, RuntimeError) as exc:
                raise RunError(f"agent '{self.agent_name}': {exc}") from None

    def close(self) -> None:
        """Release what :meth:`prepare` built when the episode will not run."""
        if self._prepared is not None:
            self._close_agent(self._prepared[2])
        self._prepared = None
        self._release_hidden()

    def _release_hidden(self) -> None:
        """Give task files closed for an agent process their modes back (once)."""
        hidden, self._hidden = self._hidden, None
        if hidden is not None:
            hidden.release()

    # -- setup ------------------------------------------------------------------

    def _write_config(self, tools: list[Tool]) -> None:
        data = {
            "run_id": self.run_id,
            "rgym_version": __version__,
            "hostname": socket.gethostname(),
            "run": unstructure(self.config),
            "profile": self.profile,
            "budget": unstructure(self.budget),
            "task": unstructure(attrs.evolve(self.task, root=None)),
            "task_root": str(self.task.root),
            "agent": self.agent_name,
            "sandbox": self.sandbox_name,
            "tools": [t.qualified_name for t in tools],
            "plugins": [unstructure(p) for p in self.registry.plugins],
        }
        write_config(self.run_dir, data)

    def _make_sandbox(self) -> Sandbox:
        spec = self.registry.sandbox(self.sandbox_name)
        return spec.factory(sandbox_config(self.run_id, self.task, self.resources, self.config))

    def _make_agent(self) -> Agent:
        """Build the agent before the run directory exists, so a bad model name,
        a missing key or an unknown option stops the run with a usage error."""
        if self._agent is not None:
            return self._agent
        assert self.agent_spec is not None
        spec = self.agent_spec
        if spec.options is not None:
            unknown = sorted(set(self.config.agent_options) - set(spec.options))
            if unknown:
                known = ", ".join(f"{k} ({v})" for k, v in sorted(spec.options.items())) or "none"
                raise RunError(f"agent '{self.agent_name}' has no option {', '.join(unknown)}; "
                               f"its options: {known}")
        cfg = AgentConfig(model=self.config.model, base_url=self.config.base_url,
                          seed=self.config.seed, options=dict(self.config.agent_options),
                          run_dir=self.run_dir, task_id=self.task.id, profile=self.profile,
                          create_model_client=self.registry.create_model_client)
        try:
            if self.config.agent_isolation != "none":  # the scaffold in its own confined process
                from rgym_core.agent_process import isolated_agent

                return isolated_agent(self.agent_registration, cfg, self.config.agent_isolation,
                                      registry=self.registry, budget=self.budget)
            return spec.factory(cfg)
        except (ValueError, LookupError, OSError, RuntimeError) as exc:
            raise RunError(f"agent '{self.agent_name}' could not start: {exc}") from None

    # -- the run ----------------------------------------------------------------

    def check_devices(self) -> None:
        """See :func:`rgym_core.episode_plan.check_devices`."""
        check_devices(self.task, self.profile, self.resources)

    def run(self) -> EpisodeResult:
        started_wall = time.time()
        self.prepare()
        try:
            self.check_devices()
        except RunError:
            self.close()
            raise
        assert self._prepared is not None
        tools, datasets, agent = self._prepared
        self.tools = {t.name: t for t in tools}
        restored: Path | None = None
        if self.resume is None:
            try:
                create_run_dir(self.run_dir)
            except FileExistsError:
                self.close()
                raise RunError(f"{self.run_dir}: the run directory already exists") from None
            self._write_config(tools)
        else:
            restored = self._take_over(agent)
        self.writer = TrajectoryWriter(self.run_dir)
        self.hooks = LifecycleHooks(self.registry, self._hook_error)
        if self.resume is None:
            self.writer.write("start", {"run_id": self.run_id, "task": self.task.id,
                                        "agent": self.agent_name, "model": self.config.model,
                                        "profile": self.profile, "sandbox": self.sandbox_name,
                                        "started_at": started_wall, "pid": os.getpid(),
                                        "tools": [t.qualified_name for t in tools]})
        else:
            if self.writer.repaired is not None:
                self.writer.write("repaired", {"cut": self.writer.repaired[:200]})
            self._resumed = self.resume.record()
            self.writer.write("resume", {"resume": unstructure(self._resumed), "pid": os.getpid(),
                                         "tools": [t.qualified_name for t in tools]})
        result = EpisodeResult(
            run_id=self.run_id, task_id=self.task.id, agent=self.agent_name, model=self.config.model,
            sandbox=self.sandbox_name, seed=self.config.seed, status=ExitStatus.ERROR,
            primary_metric=self.task.primary_metric.name, direction=self.task.primary_metric.direction,
            metrics={m.name: m.direction for m in self.task.metrics},
            baseline_scores=self.task.baseline_scores,
            reference_scores=dict(self.task.reference_scores),
            subtasks=list(self.task.subtasks), profile=self.profile,
            started_at=started_wall, run_dir=str(self.run_dir), tags=dict(self.config.tags))
        if self.resume is not None:
            result.started_at = self.resume.started_at or started_wall
            result.resumes = [*self.resume.resumes, self._resumed]
        sandbox: Sandbox | None = None
        self.info: EpisodeInfo | None = None
        ctx: ToolContext | None = None
        self.progress("setup", {"run_dir": str(self.run_dir), "run_id": self.run_id})
        try:
            with _signals_as_interrupt():
                try:
                    sandbox = self._make_sandbox()
                    self._sandbox = sandbox
                    if restored is not None:  # the interrupted run's workspace
                        sandbox.start(WorkspaceLayout(starter=restored, datasets=datasets))
                    else:
                        with workspace_starter(self.task, datasets) as starter:
                            sandbox.start(WorkspaceLayout(starter=starter, datasets=datasets))
                    self.writer.write("sandbox", {"backend": self.sandbox_name,
                                                  "workspace": sandbox.workspace,
                                                  "host_workspace": _host_workspace(sandbox),
                                                  "reap": _reap_handle(sandbox)})
                    result.isolation = IsolationInfo.of(self.config.agent_isolation, agent, sandbox)
                    spec = self.registry.sandbox(self.sandbox_name)
                    self.grader = make_grader(self.task, sandbox, datasets, self.run_dir,
                                              isolated=spec.isolated_grading,
                                              seed=self.config.grader_seed,
                                              env=profile_env(self.task))
                    try:
                        if result.isolation is not None:
                            result.isolation.grading = self.grader.confinement
                    except Exception:  # noqa: BLE001 - informative only: the gradings report it
                        pass
                    ctx = ToolContext(sandbox=sandbox, task=self.task, run_dir=self.run_dir,
                                      state=self.state, grade=self._grade, record=self._record,
                                      action_timeout_s=self.budget.action_timeout_s,
                                      episode_id=self.run_id)
                    result.end_reason = self._run_loop(sandbox, ctx, agent)
                    self._final_grading(result, result.end_reason)
                except KeyboardInterrupt as exc:
                    result.status = ExitStatus.CANCELLED
                    result.end_reason = EndReason.CANCELLED
                    result.error = f"cancelled by {_signal_name(exc)}"
        except Exception as exc:  # noqa: BLE001 - any failure still leaves a result
            result.status = ExitStatus.ERROR
            result.error = f"{type(exc).__name__}: {exc}"
            result.end_reason = result.end_reason or EndReason.ERROR
            self.writer.write("error", {"traceback": traceback.format_exc()})
        finally:
            with _shielded():
                self._close_agent(agent)  # when the episode failed before the agent's loop
                self._finish(sandbox, ctx, result)
        return result

    def _take_over(self, agent: Agent) -> Path:
        """Make the interrupted run directory this episode's: check the agent can
        resume, copy the workspace out, then (nothing can fail after) drop the
        cancelled result and archive, count the spent budget and own ``config.json``.
        Returns the restored workspace folder (removed at the end)."""
        plan = self.resume
        assert plan is not None
        if not callable(getattr(agent, "resume", None)):
            self.close()
            raise RunError(f"{plan.run_dir / 'config.json'}: run.agent: agent '{self.agent_name}' "
                           "has no resume() method, so it cannot continue an episode (see "
                           "ResumableAgent in rgym_core/agents.py); start a new run")
        try:
            restored = plan.restore_workspace(self.registry, [m.mount for m in self.task.datasets])
        except Exception as exc:  # noqa: BLE001 - one line: the workspace could not be copied
            self.close()
            raise RunError(f"{plan.run_dir}: the interrupted run's workspace "
                           f"({plan.workspace_source}) could not be copied: {exc}") from None
        self._temp_snapshots.append(restored.parent)
        (self.run_dir / "result.json").unlink(missing_ok=True)
        if plan.workspace_source == "archive":
            (self.run_dir / WORKSPACE_ARCHIVE).unlink(missing_ok=True)
        self.scores = list(plan.scores)
        self.step_index = self.completed_steps = plan.from_step
        self.status.steps = plan.from_step
        self.status.usage.add(plan.usage)
        write_config(self.run_dir, plan.config_data)
        return restored


def _reap_handle(sandbox: Sandbox) -> dict[str, Any]:
    """The sandbox's :meth:`~rgym_core.sandbox.Sandbox.reap_handle` ({} when it fails)."""
    try:
        handle = sandbox.reap_handle()
        json.dumps(handle)
    except Exception:  # noqa: BLE001 - informative: `rgym grade` then kills nothing
        return {}
    return handle


def _host_workspace(sandbox: Sandbox) -> str | None:
    """Where the workspace lives on this host, when it is a host folder (so that
    ``rgym grade`` can archive what a killed run left)."""
    for name in ("host_workspace", "workspace"):
        value = getattr(sandbox, name, None)
        if isinstance(value, str | Path) and value and os.path.isdir(value):
            return str(value)
    return None


def preflight(config: RunConfig, registry: Registry | None = None, *,
              agent: Agent | None = None) -> Episode:
    """Check ``config`` as :func:`run_episode` would before it creates anything, and
    return the prepared (not started) :class:`Episode`; call ``.run()`` on it, or
    ``.close()`` to drop it.  Raises :class:`RunError` with the fix: unknown names,
    an unknown profile, ``--model`` for an agent that takes none, a missing model,
    key or dataset, a cost limit on an unpriced model, an unreachable model server."""
    registry = registry or load_registry()
    episode = Episode(config, registry, agent=agent)
    episode.prepare()
    return episode


def run_episode(config: RunConfig, registry: Registry | None = None, *, agent: Agent | None = None,
                progress: ProgressCallback | None = None) -> EpisodeResult:
    """Run one episode and return its result (also written to the run directory).

    Raises :class:`RunError` when the episode cannot be set up (see
    :func:`preflight`); nothing is created on disk then.  Everything that goes
    wrong after the run directory exists ends up in the result instead.
    """
    registry = registry or load_registry()
    episode = Episode(config, registry, agent=agent, progress=progress)
    return episode.run()


__all__ = ["AGENT_CAUSED", "PROFILE_ENV", "Episode", "ProgressCallback", "RunConfig", "RunError",
           "final_status", "grade_kind", "make_grader", "preflight", "profile_env", "resolve_datasets",
           "run_dir_path", "run_episode", "select_tools", "with_tool_options"]

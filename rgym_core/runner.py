"""The episode runner: check, lay out, loop agent -> tool -> observation, grade, record.

:func:`run_episode` is the whole life of one episode:

1. *pre-flight* (:func:`preflight`): resolve the task (and its profile), agent,
   sandbox backend, datasets and tools from the registry, build the agent and
   check its model clients (a price for a cost limit, a server that answers, a
   key).  Anything wrong here raises :class:`RunError` (``rgym run`` exits 2) and
   no run directory is created;
2. create the run directory (:mod:`rgym_core.rundir`) and write ``config.json``;
3. start the sandbox with the starter files and read-only datasets;
4. ask the agent for actions and run each through its tool (the shell is the
   ``bash`` tool) until the agent submits, a budget ends (steps, wall-clock,
   cost, tokens) or the agent fails; every step is appended to
   ``trajectory.jsonl`` as it happens, and the lifecycle hooks of every plugin
   are called through pluggy (:class:`~rgym_core.episode.LifecycleHooks`);
5. grade the final workspace from a clean copy (an *autosubmission* when the
   agent did not submit) and write ``result.json`` and ``workspace.tar.gz``.

SIGINT and SIGTERM end the episode with status ``cancelled``: the trajectory
so far and a result are still written and the sandbox is removed.  A cancelled or
killed episode goes on with :func:`rgym_core.resume.resume_episode` (``rgym run
--resume``), which gives :class:`Episode` the plan it read from the run directory.  A signal
during the final grading stops the grader and records the episode as
``ungraded``; its workspace is archived, and ``rgym grade RUN_DIR`` grades it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core import __version__
from rgym_core.agents import (
    Agent,
    AgentConfig,
    AgentFormatError,
    AgentSpec,
    BudgetExceeded,
    EpisodeStatus,
    TaskContext,
)
from rgym_core.datasets import DatasetError, prepare_dataset, starter_folders, workspace_starter
from rgym_core.episode import EpisodeInfo, LifecycleHooks
from rgym_core.grading import (
    Grader,
    HiddenFromOthers,
    agent_process_reads_host_files,
    hide_task_files,
)
from rgym_core.models import ModelRequirements, check_model_client, model_clients_of
from rgym_core.records import (
    Action,
    EndReason,
    EpisodeResult,
    ExitStatus,
    IsolationInfo,
    Observation,
    ScoreRecord,
    Step,
)
from rgym_core.registry import Registry, RegistryError, load_registry
from rgym_core.rundir import (
    WORKSPACE_ARCHIVE,
    TrajectoryWriter,
    archive_folder,
    archive_workspace,
    create_run_dir,
    mount_excludes,
    run_dir_path,
    write_config,
    write_result,
)
from rgym_core.sandbox import (
    Sandbox,
    SandboxConfig,
    SandboxError,
    WorkspaceExportError,
    WorkspaceLayout,
    host_gpu_count,
)
from rgym_core.serialization import unstructure
from rgym_core.snapshot import Snapshot, store_snapshot
from rgym_core.specs import Budget, PreparedDataset, TaskSpec
from rgym_core.tools import Tool, ToolContext, ToolError, ToolResult

#: The environment variable that names the task profile, in the agent's shell and the grader.
PROFILE_ENV = "RGYM_PROFILE"

ProgressCallback = Callable[[str, dict[str, Any]], None]


class RunError(RuntimeError):
    """The episode could not be set up (unknown names, bad dataset...)."""


@define
class RunConfig:
    """What the user asked for; ``None`` budget fields keep the task's defaults."""

    task: str
    agent: str = "scripted"
    model: str | None = None
    base_url: str | None = None
    sandbox: str = "local"
    max_steps: int | None = None
    time_limit_s: float | None = None
    action_timeout_s: float | None = None
    #: The timeout of training commands (``Budget.training_timeout_s``).
    training_timeout_s: float | None = None
    cost_limit_usd: float | None = None
    token_limit: int | None = None
    seed: int | None = None
    grader_seed: int | None = None
    runs_dir: Path = Path("runs")
    agent_options: dict[str, Any] = field(factory=dict)
    tools: list[str] = field(factory=list)
    datasets: dict[str, str] = field(factory=dict)
    data_dir: Path | None = None
    network: bool | None = None
    gpus: str | None = None
    image: str | None = None
    memory_mb: int | None = None
    cpus: float | None = None
    pids: int | None = None
    sandbox_options: dict[str, Any] = field(factory=dict)
    #: Tool settings over the task's ``tool_config`` (after its profile's): ``KEY`` (the
    #: built-in tools, namespace ``rgym``) or ``NAMESPACE.KEY`` -> value.
    tool_options: dict[str, Any] = field(factory=dict)
    tags: dict[str, str] = field(factory=dict)
    archive_workspace: bool = True
    #: The task profile (``None``: the task's default profile).
    profile: str | None = None
    #: Write into exactly this run directory (it must not exist yet) instead of a new
    #: ``runs_dir/<task>/<solver>/<stamp>-<id>`` (sweeps name theirs by cell).
    run_dir: Path | None = None
    #: Send one cheap request to each model server before the episode starts.
    probe_models: bool = True
    #: ``none``: the agent scaffold runs in this process (trusted code); ``process``:
    #: in its own confined process (:mod:`rgym_core.agent_process`, untrusted scaffolds).
    agent_isolation: str = "none"


def with_tool_options(task: TaskSpec, options: dict[str, Any]) -> TaskSpec:
    """``task`` with ``--tool-option`` values merged into its ``tool_config``: ``KEY`` sets
    the built-in tools' (namespace ``rgym``) setting, ``NAMESPACE.KEY`` another pack's."""
    merged = {ns: dict(cfg) for ns, cfg in task.tool_config.items()}
    for name, value in options.items():
        namespace, _, key = name.rpartition(".")
        if not key:
            raise RunError(f"--tool-option {name!r}: give KEY=VALUE or NAMESPACE.KEY=VALUE "
                           "(e.g. window=100, rgym.search=fixed)")
        merged.setdefault(namespace or "rgym", {})[key] = value
    return attrs.evolve(task, tool_config=merged)


def select_tools(registry: Registry, task: TaskSpec, requested: list[str]) -> list[Tool]:
    """The episode's tools: every default tool, then the task's and the user's.

    A request may be a full name (``memory/memory_read``), a short name
    (``memory_read``) or a namespace (``memory``: all of its tools).
    """
    chosen: dict[str, Tool] = {}
    for reg in registry.tools.values():
        if reg.item.default:
            chosen[reg.name] = reg.item
    for want in [*task.tools, *requested]:
        in_namespace = [r for r in registry.tools.values() if r.name.split("/", 1)[0] == want]
        if in_namespace and want not in registry.tools:
            for reg in in_namespace:
                chosen[reg.name] = reg.item
            continue
        reg = registry.resolve("tools", want)
        chosen[reg.name] = reg.item
    by_short: dict[str, str] = {}
    for full, tool in chosen.items():
        if tool.name in by_short:
            raise RunError(f"two tools are both called '{tool.name}': {by_short[tool.name]} and {full}")
        by_short[tool.name] = full
    return list(chosen.values())


def resolve_datasets(registry: Registry, task: TaskSpec, config: RunConfig) -> dict[str, PreparedDataset]:
    """The task's datasets prepared on the host, by mount (``config.datasets``
    replaces a mount's dataset with another of the same form)."""
    prepared: dict[str, PreparedDataset] = {}
    mounts = {m.mount for m in task.datasets}
    unknown = sorted(set(config.datasets) - mounts)
    if unknown:
        raise RunError(f"--dataset names mount(s) {', '.join(unknown)} that task '{task.id}' does not "
                       f"have (its mounts: {', '.join(sorted(mounts)) or 'none'})")
    for mount in task.datasets:
        default = registry.dataset(mount.id)
        spec = default
        if mount.mount in config.datasets:
            spec = registry.dataset(config.datasets[mount.mount])
            if spec.form != default.form:
                raise RunError(f"dataset '{spec.id}' has form '{spec.form}', but task '{task.id}' "
                               f"expects form '{default.form}' at '{mount.mount}'")
        prepared[mount.mount] = prepare_dataset(spec, data_dir=config.data_dir)
    return prepared


class _AgentLoop:
    """Runs an agent's methods, sync or ``async``: the coroutines of one episode
    share one event loop (so an async client made in ``start`` still works in
    ``act``), private to the episode (episodes may run in several threads)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        result = fn(*args)
        if not inspect.isawaitable(result):
            return result
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(_await(result))

    def close(self) -> None:
        if self._loop is not None:
            loop, self._loop = self._loop, None
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()


async def _await(awaitable: Any) -> Any:
    return await awaitable


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so both cancel an episode cleanly."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous_term = signal.signal(signal.SIGTERM, handler)
    previous_int = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


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


def profile_env(task: TaskSpec) -> dict[str, str]:
    """The task's ``env`` (with its profile's) and ``RGYM_PROFILE``, for the agent's
    shell and the grader."""
    env = {str(k): str(v) for k, v in task.env.items()}
    if task.profile is not None:
        env[PROFILE_ENV] = task.profile
    return env


class Episode:
    """One running episode.  Most users call :func:`run_episode` instead.

    :meth:`prepare` does every check that can fail before the run directory
    exists (it raises :class:`RunError`); :meth:`run` calls it first.
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
        try:
            base_task: TaskSpec = registry.task(config.task)
            agent_reg = registry.resolve("agents", config.agent) if agent is None else None
            self.sandbox_name = registry.resolve("sandboxes", config.sandbox).name
        except RegistryError as exc:
            raise RunError(str(exc)) from None
        try:
            self.task: TaskSpec = base_task.with_profile(config.profile)
        except ValueError as exc:  # an unknown profile (a SpecError names the task and its profiles)
            raise RunError(str(exc)) from None
        self.profile: str | None = self.task.profile
        if config.tool_options:
            self.task = with_tool_options(self.task, config.tool_options)
        self.agent_spec: AgentSpec | None = agent_reg.item if agent_reg else None
        self.agent_registration = agent_reg
        if config.agent_isolation not in ("none", "process"):
            raise RunError(f"unknown agent isolation '{config.agent_isolation}': choose none "
                           "(in-process, trusted scaffolds) or process (untrusted scaffolds)")
        if agent is not None and config.agent_isolation != "none":
            raise RunError("an agent object given to the runner cannot be isolated; register "
                           "it and pass its name, or use agent_isolation='none'")
        self.agent_name = agent_reg.name if agent_reg else type(agent).__name__
        if self.agent_spec is not None:
            if self.agent_spec.needs_model and not config.model:
                raise RunError(f"agent '{self.agent_name}' needs a model: pass --model provider/name")
            if config.model and not self.agent_spec.accepts_model:
                raise RunError(f"agent '{self.agent_name}' takes no model, but --model "
                               f"{config.model} was given: drop --model, or choose an LLM agent "
                               "(`rgym list agents`)")
        self._agent = agent
        self.budget: Budget = self.task.budget.merged(
            max_steps=config.max_steps, time_limit_s=config.time_limit_s,
            action_timeout_s=config.action_timeout_s, cost_limit_usd=config.cost_limit_usd,
            token_limit=config.token_limit, training_timeout_s=config.training_timeout_s)
        self.run_id = resume.run_id if resume is not None and resume.run_id else uuid.uuid4().hex[:12]
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
        self.run_dir = (Path(config.run_dir) if config.run_dir is not None else
                        run_dir_path(Path(config.runs_dir), self.task.id, self.agent_name,
                                     config.model, self.run_id, profile=self.profile))

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

    def _close_agent(self, agent: Agent) -> None:
        """Close the agent (its optional ``close()``), once, then its event loop."""
        if not self._agent_closed:
            self._agent_closed = True
            close = getattr(agent, "close", None)
            try:
                if callable(close):
                    self._loop.call(close)
            except Exception:  # noqa: BLE001 - closing never fails an episode
                pass
            finally:
                self._loop.close()

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
        overrides: dict[str, Any] = {
            "memory_mb": self.config.memory_mb, "cpus": self.config.cpus, "pids": self.config.pids}
        res = attrs.evolve(self.task.resources,
                           **{k: v for k, v in overrides.items() if v is not None})
        spec = self.registry.sandbox(self.sandbox_name)
        explicit = {name for name in ("memory_mb", "cpus", "pids", "gpus", "image", "network")
                    if getattr(self.config, name) is not None}
        cfg = SandboxConfig(run_id=self.run_id, task_id=self.task.id, resources=res,
                            network=self.config.network, image=self.config.image,
                            gpus=self.config.gpus, labels={"rgym.task": self.task.id},
                            env=profile_env(self.task),
                            options=dict(self.config.sandbox_options), explicit=explicit)
        return spec.factory(cfg)

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

    def _hook_error(self, hook: str, plugin: str, exc: BaseException) -> None:
        self.writer.write("hook_error", {
            "hook": hook, "plugin": plugin, "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))})

    # -- the loop ---------------------------------------------------------------

    def check_devices(self) -> None:
        """Refuse, before anything is created, a profile rgym cannot run as the original
        did (``unavailable:``), and one that declares GPUs (``resources.gpus``) on a
        machine without them unless ``--gpus`` says how many to give it (``--gpus 0``: run
        it without one, knowingly).  Neither runs on something smaller by accident, its
        numbers compared with the original's."""
        chosen = self.task.profiles.get(self.profile) if self.profile else None
        if chosen is not None and chosen.unavailable:
            raise RunError(f"task '{self.task.id}' profile '{self.profile}' cannot run in rgym yet: "
                           f"{chosen.unavailable.strip()} (rgym show {self.task.id} lists its "
                           "other profiles)")
        wanted = self.task.resources.gpus or 0
        if not wanted or self.config.gpus is not None:
            return
        have = host_gpu_count()
        if have >= wanted:
            return
        profile = f" (profile '{self.profile}')" if self.profile else ""
        raise RunError(f"task '{self.task.id}'{profile} needs {wanted} GPU(s) (resources.gpus) and "
                       f"this machine has {have}: run it where a GPU is, choose a CPU profile "
                       f"(rgym show {self.task.id} lists them), or pass --gpus 0 to run it "
                       "without one anyway")

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
                    self._run_loop(sandbox, ctx, result, agent)
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

    def _run_loop(self, sandbox: Sandbox, ctx: ToolContext, result: EpisodeResult,
                  agent: Agent) -> None:
        facts = dict(sandbox.describe().items())  # the facts the backend set (typed or a mapping)
        self.status.extras.update({k: v for k, v in facts.items()
                                   if k in ("memory", "gpus", "cpus") and v is not None})
        for tool in self.tools.values():
            ctx.tool_config = self.task.tool_config.get(tool.namespace, {})
            tool.start(ctx)
            self.status.providers.append(functools.partial(tool.status, ctx))
        context = TaskContext(
            task_id=self.task.id, description=self.task.description,
            tools=[t.schema for t in self.tools.values()], budget=self.budget, status=self.status,
            metrics=list(self.task.metrics), baseline_scores=self.task.baseline_scores,
            baseline_command=self.task.baseline.command if self.task.baseline else None,
            resources=self.task.resources, workspace=sandbox.workspace, run_dir=self.run_dir,
            seed=self.config.seed, scripted_actions=list(self.task.scripted_actions),
            sandbox_facts=facts)
        self.info = EpisodeInfo(run_id=self.run_id, run_dir=self.run_dir, task=self.task,
                                agent=self.agent_name, model=self.config.model,
                                sandbox=self.sandbox_name, budget=self.budget, seed=self.config.seed,
                                status=self.status, tools=list(self.tools), profile=self.profile,
                                sandbox_handle=sandbox,
                                datasets=dict(self._prepared[1]) if self._prepared else {})
        self.hooks.call("rgym_episode_start", episode=self.info)
        plan = self.resume
        self.status.started_at = time.monotonic() - (plan.elapsed_s if plan is not None else 0.0)
        if plan is not None and plan.steps:
            observation = plan.steps[-1].observation  # what the next act() answers
        else:
            observation = Observation(output=self._opening(sandbox))
        self.progress("start", {"run_dir": str(self.run_dir), "run_id": self.run_id,
                                "status": self.status})
        try:
            self._loop.call(agent.start, context)
            if plan is not None:
                self._loop.call(agent.resume, list(plan.steps), plan.agent_state)  # type: ignore[attr-defined]
            end_reason = self._steps(agent, ctx, observation)
        finally:
            self._close_agent(agent)
        result.end_reason = end_reason
        self._final_grading(result, end_reason)

    def _opening(self, sandbox: Sandbox) -> str:
        listing = sandbox.run("ls -A", timeout=30)
        files = " ".join(listing.output.split()) or "(empty)"
        return (f"The workspace {sandbox.workspace} is ready. Files: {files}\n"
                f"Tools: {', '.join(self.tools)}.")

    def _steps(self, agent: Agent, ctx: ToolContext, observation: Observation) -> EndReason:
        """Loop until the episode ends; return why it ended."""
        budget = self.budget
        while True:
            if budget.max_steps is not None and self.step_index >= budget.max_steps:
                return EndReason.MAX_STEPS
            if budget.time_limit_s is not None and self.status.elapsed_s >= budget.time_limit_s:
                return EndReason.TIME
            try:
                action = self._loop.call(agent.act, observation)
            except BudgetExceeded as exc:
                kind = EndReason(exc.kind)
                self._agent_stopped(exc, kind)
                return kind
            except AgentFormatError as exc:
                self._agent_stopped(exc, EndReason.FORMAT_ERROR)
                return EndReason.FORMAT_ERROR
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - an agent crash autosubmits
                self.writer.write("agent_stop", {"reason": EndReason.AGENT_ERROR.value,
                                                 "message": f"{type(exc).__name__}: {exc}",
                                                 "traceback": traceback.format_exc()})
                self._agent_error = f"{type(exc).__name__}: {exc}"
                return EndReason.AGENT_ERROR
            if not isinstance(action, Action):
                self._agent_error = f"agent returned {type(action).__name__}, not an Action"
                return EndReason.AGENT_ERROR
            agent_state = self._agent_state(agent)
            self.step_index += 1
            self.status.steps = self.step_index
            self.status.usage.add(action.usage)
            started = time.time()
            t0 = time.monotonic()
            ctx.step = self.step_index
            remaining = self.status.time_left_s
            command = action.args.get("command") if action.tool == "bash" else None
            timeout = budget.timeout_for(command if isinstance(command, str) else None)
            ctx.action_timeout_s = (timeout if remaining is None
                                    else max(1.0, min(timeout, remaining)))
            self.progress("action", {"index": self.step_index, "action": action, "status": self.status})
            observation = self._execute(action, ctx)
            duration = time.monotonic() - t0
            step = Step(index=self.step_index, action=action, observation=observation,
                        started_at=started, duration_s=round(duration, 6),
                        elapsed_s=round(self.status.elapsed_s, 3))
            self.writer.step(step, agent_state=agent_state)
            self.completed_steps = self.step_index
            self.hooks.call("rgym_step", episode=self.info, step=step)
            self.progress("step", {"step": step, "status": self.status})
            if observation.info.get("sandbox_error"):
                if observation.info.get("sandbox_error") in AGENT_CAUSED:
                    # the agent's own processes used up its limits: its failure, not ours
                    self._agent_error = self._agent_error or observation.output[-500:]
                    return EndReason.AGENT_ERROR
                return EndReason.SANDBOX_ERROR
            if observation.done:
                return EndReason.SUBMIT
            limit = budget.cost_limit_usd
            if limit is not None and self.status.usage.cost_usd >= limit:
                return EndReason.COST
            if budget.token_limit is not None and self.status.usage.tokens >= budget.token_limit:
                return EndReason.TOKENS

    def _agent_state(self, agent: Agent) -> Any:
        """The agent's optional ``save_state()`` (kept with the step for a resume);
        a failing or unserialisable one is recorded once and then ignored."""
        save = getattr(agent, "save_state", None)
        if not callable(save) or self._state_failed:
            return None
        try:
            state = self._loop.call(save)
            json.dumps(state)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - the episode goes on; only a resume loses
            self._state_failed = True
            self.writer.write("hook_error", {"hook": "save_state", "plugin": self.agent_name,
                                             "error": f"{type(exc).__name__}: {exc}"})
            return None
        return state

    def _agent_stopped(self, exc: Exception, reason: EndReason) -> None:
        """Record an agent's stop, counting the model usage of its unfinished action
        (agents attach ``usage`` and ``llm_calls`` to the exception)."""
        self._agent_error = f"{type(exc).__name__}: {exc}"
        usage = getattr(exc, "usage", None)
        if usage is not None:
            self.status.usage.add(usage)
        self.writer.write("agent_stop", {"reason": reason.value, "message": str(exc),
                                         "usage": unstructure(usage) if usage is not None else None,
                                         "llm_calls": getattr(exc, "llm_calls", [])})

    def _execute(self, action: Action, ctx: ToolContext) -> Observation:
        self._pending_info = {"tool": action.tool}
        tool = self.tools.get(action.tool)
        if tool is None:
            return Observation(output=f"Unknown tool '{action.tool}'. Available tools: "
                                      f"{', '.join(self.tools)}.", error=True, info=self._pending_info)
        ctx.tool_config = self.task.tool_config.get(tool.namespace, {})
        try:
            args = tool.schema.bind(action.args)
            out = tool.call(args, ctx)
        except (ToolError, FileNotFoundError, PermissionError, IsADirectoryError,
                NotADirectoryError, FileExistsError) as exc:
            return Observation(output=_error_text(exc), error=True, info=self._pending_info)
        except SandboxError as exc:
            self._pending_info.update(sandbox_error=exc.reason)
            return Observation(output=f"The sandbox failed: {exc}", error=True, info=self._pending_info)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - a tool bug is an observation, not a crash
            self._pending_info["traceback"] = traceback.format_exc()
            return Observation(output=f"Tool '{action.tool}' failed: {type(exc).__name__}: {exc}",
                               error=True, info=self._pending_info)
        res = out if isinstance(out, ToolResult) else ToolResult(output=str(out))
        info = {**self._pending_info, **res.info}
        exit_code = info.get("exit_code")
        if exit_code in (137, -9) and action.tool == "bash":
            failure = ctx.sandbox.health()
            if failure is not None and failure.reason in AGENT_CAUSED:
                info["sandbox_limit"] = failure.reason  # a killed command: the episode goes on
                res.output += f"\n[{failure}]"
            elif failure is not None:
                info["sandbox_error"] = failure.reason
                res.output += f"\n[the sandbox failed: {failure}]"
        return Observation(output=res.output, error=res.error, exit_code=exit_code,
                           truncated=bool(info.get("truncated")), score=res.score,
                           done=res.submit, info=info)

    def _record(self, key: str, value: Any) -> None:
        self._pending_info[key] = value

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


#: ``SandboxError.reason`` values the agent's own processes cause (memory, processes,
#: disk used up): a command they kill is an observation; a sandbox they break ends the
#: episode as the agent's failure (``agent_error``), never as a retryable sandbox error.
AGENT_CAUSED = frozenset({"oom", "pids", "disk"})


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


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return str(exc)
    names: dict[type[BaseException], str] = {
        FileNotFoundError: "No such file or directory", PermissionError: "Permission denied",
        IsADirectoryError: "Is a directory", NotADirectoryError: "Not a directory",
        FileExistsError: "File exists"}
    name = names.get(type(exc), type(exc).__name__)
    target = getattr(exc, "filename", None)
    return f"{name}: {target}" if target else f"{name}: {exc}"


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


__all__ = ["PROFILE_ENV", "Episode", "ProgressCallback", "RunConfig", "RunError",
           "final_status", "grade_kind", "make_grader", "preflight", "profile_env", "resolve_datasets",
           "run_dir_path", "run_episode", "select_tools"]

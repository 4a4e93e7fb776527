"""The episode runner: lay out, loop agent -> tool -> observation, grade, record.

:func:`run_episode` is the whole life of one episode:

1. resolve the task, agent, sandbox backend, datasets and tools from the registry;
2. create the run directory and write ``config.json``;
3. start the sandbox with the starter files and read-only datasets;
4. ask the agent for actions and run each through its tool (the shell is the
   ``bash`` tool) until the agent submits, a budget ends (steps, wall-clock,
   cost, tokens) or the agent fails; every step is appended to
   ``trajectory.jsonl`` as it happens;
5. grade the final workspace from a clean copy (an *autosubmission* when the
   agent did not submit) and write ``result.json`` and ``workspace.tar.gz``.

SIGINT and SIGTERM end the episode with status ``cancelled``: the trajectory
so far and a result are still written and the sandbox is removed.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import signal
import socket
import tarfile
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
from rgym_core.datasets import DatasetError, prepare_dataset
from rgym_core.episode import EpisodeInfo
from rgym_core.grading import Grader
from rgym_core.records import Action, EpisodeResult, ExitStatus, Observation, ScoreRecord, Step
from rgym_core.registry import Registry, RegistryError, load_registry
from rgym_core.sandbox import Sandbox, SandboxConfig, SandboxError, WorkspaceLayout
from rgym_core.serialization import dumps, unstructure
from rgym_core.specs import Budget, PreparedDataset, TaskSpec
from rgym_core.tools import Tool, ToolContext, ToolError, ToolResult
from rgym_core.trajectory import CONFIG_FILE, RESULT_FILE, TRAJECTORY_FILE, TrajectoryWriter

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
    tags: dict[str, str] = field(factory=dict)
    archive_workspace: bool = True


def _short(name: str) -> str:
    return name.split("/", 1)[-1]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def run_dir_path(runs_dir: Path, task_id: str, agent: str, model: str | None, run_id: str) -> Path:
    """``runs/<task>/<agent>[__<model>]/<timestamp>-<run id>/`` (not created)."""
    solver = _short(agent) + (f"__{_slug(model)}" if model else "")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return runs_dir / task_id.replace("/", "__") / solver / f"{stamp}-{run_id}"


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


def _resolve_datasets(registry: Registry, task: TaskSpec, config: RunConfig) -> dict[str, PreparedDataset]:
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


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async agent method."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


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


class Episode:
    """One running episode.  Most users call :func:`run_episode` instead."""

    def __init__(self, config: RunConfig, registry: Registry, *, agent: Agent | None = None,
                 progress: ProgressCallback | None = None) -> None:
        self.config = config
        self.registry = registry
        self.progress = progress or (lambda event, data: None)
        try:
            self.task: TaskSpec = registry.task(config.task)
            agent_reg = registry.resolve("agents", config.agent) if agent is None else None
            self.sandbox_name = registry.resolve("sandboxes", config.sandbox).name
        except RegistryError as exc:
            raise RunError(str(exc)) from None
        self.agent_spec: AgentSpec | None = agent_reg.item if agent_reg else None
        self.agent_name = agent_reg.name if agent_reg else type(agent).__name__
        if self.agent_spec is not None and self.agent_spec.needs_model and not config.model:
            raise RunError(f"agent '{self.agent_name}' needs a model: pass --model provider/name")
        self._agent = agent
        self.budget: Budget = self.task.budget.merged(
            max_steps=config.max_steps, time_limit_s=config.time_limit_s,
            action_timeout_s=config.action_timeout_s, cost_limit_usd=config.cost_limit_usd,
            token_limit=config.token_limit)
        self.run_id = uuid.uuid4().hex[:12]
        self.status = EpisodeStatus(budget=self.budget)
        self.scores: list[ScoreRecord] = []
        self.state: dict[str, Any] = {}
        self.step_index = 0
        self.completed_steps = 0
        self._agent_error: str | None = None
        self._pending_info: dict[str, Any] = {}

    # -- setup ------------------------------------------------------------------

    def _write_config(self, tools: list[Tool]) -> None:
        data = {
            "run_id": self.run_id,
            "rgym_version": __version__,
            "hostname": socket.gethostname(),
            "run": unstructure(self.config),
            "budget": unstructure(self.budget),
            "task": unstructure(attrs.evolve(self.task, root=None)),
            "task_root": str(self.task.root),
            "agent": self.agent_name,
            "sandbox": self.sandbox_name,
            "tools": [t.qualified_name for t in tools],
            "plugins": [unstructure(p) for p in self.registry.plugins],
        }
        (self.run_dir / CONFIG_FILE).write_text(dumps(data, indent=2))

    def _make_sandbox(self) -> Sandbox:
        res = self.task.resources
        res = attrs.evolve(res, **{k: v for k, v in {
            "memory_mb": self.config.memory_mb, "cpus": self.config.cpus, "pids": self.config.pids,
        }.items() if v is not None})
        spec = self.registry.sandbox(self.sandbox_name)
        explicit = {name for name in ("memory_mb", "cpus", "pids", "gpus", "image", "network")
                    if getattr(self.config, name) is not None}
        cfg = SandboxConfig(run_id=self.run_id, task_id=self.task.id, resources=res,
                            network=self.config.network, image=self.config.image,
                            gpus=self.config.gpus, labels={"rgym.task": self.task.id},
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
                          run_dir=self.run_dir, task_id=self.task.id)
        try:
            return spec.factory(cfg)
        except (ValueError, LookupError, OSError, RuntimeError) as exc:
            raise RunError(f"agent '{self.agent_name}' could not start: {exc}") from None

    # -- the loop ---------------------------------------------------------------

    def run(self) -> EpisodeResult:
        started_wall = time.time()
        tools = select_tools(self.registry, self.task, self.config.tools)
        self.tools = {t.name: t for t in tools}
        try:
            datasets = _resolve_datasets(self.registry, self.task, self.config)
        except (DatasetError, RegistryError) as exc:
            raise RunError(str(exc)) from None
        self.run_dir = run_dir_path(Path(self.config.runs_dir), self.task.id, self.agent_name,
                                    self.config.model, self.run_id)
        agent = self._make_agent()
        self.run_dir.mkdir(parents=True, exist_ok=False)
        self._write_config(tools)
        self.writer = TrajectoryWriter(self.run_dir / TRAJECTORY_FILE)
        self.writer.write("start", {"run_id": self.run_id, "task": self.task.id,
                                    "agent": self.agent_name, "model": self.config.model,
                                    "sandbox": self.sandbox_name, "started_at": started_wall,
                                    "tools": [t.qualified_name for t in tools]})
        result = EpisodeResult(
            run_id=self.run_id, task_id=self.task.id, agent=self.agent_name, model=self.config.model,
            sandbox=self.sandbox_name, seed=self.config.seed, status=ExitStatus.ERROR,
            primary_metric=self.task.primary_metric.name, direction=self.task.primary_metric.direction,
            metrics={m.name: m.direction for m in self.task.metrics},
            baseline_scores=self.task.baseline_scores,
            reference_scores=dict(self.task.reference_scores),
            subtasks=[unstructure(s) for s in self.task.subtasks],
            started_at=started_wall, run_dir=str(self.run_dir), tags=dict(self.config.tags))
        sandbox: Sandbox | None = None
        self.info: EpisodeInfo | None = None
        ctx: ToolContext | None = None
        try:
            with _signals_as_interrupt():
                try:
                    self.progress("setup", {"run_dir": str(self.run_dir)})
                    sandbox = self._make_sandbox()
                    starter = self.task.path(self.task.starter_files)
                    sandbox.start(WorkspaceLayout(
                        starter=starter if starter is not None and starter.is_dir() else None,
                        datasets=datasets))
                    spec = self.registry.sandbox(self.sandbox_name)
                    self.grader = Grader(self.task, sandbox, datasets, self.run_dir,
                                         isolated=spec.isolated_grading, seed=self.config.grader_seed)
                    ctx = ToolContext(sandbox=sandbox, task=self.task, run_dir=self.run_dir,
                                      state=self.state, grade=self._grade, record=self._record,
                                      action_timeout_s=self.budget.action_timeout_s,
                                      episode_id=self.run_id)
                    self._run_loop(sandbox, ctx, result, agent)
                except KeyboardInterrupt as exc:
                    result.status = ExitStatus.CANCELLED
                    result.end_reason = "cancelled"
                    name = str(exc) if str(exc).startswith("SIG") else "SIGINT"
                    result.error = f"cancelled by {name}"
        except Exception as exc:  # noqa: BLE001 - any failure still leaves a result
            result.status = ExitStatus.ERROR
            result.error = f"{type(exc).__name__}: {exc}"
            result.end_reason = result.end_reason or "error"
            self.writer.write("error", {"traceback": traceback.format_exc()})
        finally:
            with _shielded():
                self._finish(sandbox, ctx, result)
        return result

    def _run_loop(self, sandbox: Sandbox, ctx: ToolContext, result: EpisodeResult,
                  agent: Agent) -> None:
        facts = sandbox.describe()
        self.status.extras.update({k: v for k, v in facts.items() if k in ("memory", "gpus", "cpus")})
        for tool in self.tools.values():
            ctx.tool_config = self.task.tool_config.get(tool.namespace, {})
            tool.start(ctx)
            self.status.providers.append(lambda t=tool: t.status(ctx))
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
                                status=self.status, tools=list(self.tools))
        self._lifecycle("rgym_episode_start", episode=self.info)
        self.status.started_at = time.monotonic()
        observation = Observation(output=self._opening(sandbox))
        self.progress("start", {"run_dir": str(self.run_dir), "run_id": self.run_id})
        try:
            _call(agent.start, context)
            end_reason = self._steps(agent, ctx, observation)
        finally:
            close = getattr(agent, "close", None)
            if callable(close):
                try:
                    _call(close)
                except Exception:  # noqa: BLE001
                    pass
        result.end_reason = end_reason
        self._final_grading(result, end_reason)

    def _opening(self, sandbox: Sandbox) -> str:
        listing = sandbox.run("ls -A", timeout=30)
        files = " ".join(listing.output.split()) or "(empty)"
        return (f"The workspace {sandbox.workspace} is ready. Files: {files}\n"
                f"Tools: {', '.join(self.tools)}.")

    def _steps(self, agent: Agent, ctx: ToolContext, observation: Observation) -> str:
        """Loop until the episode ends; return why it ended."""
        budget = self.budget
        while True:
            if budget.max_steps is not None and self.step_index >= budget.max_steps:
                return "max_steps"
            if budget.time_limit_s is not None and self.status.elapsed_s >= budget.time_limit_s:
                return "time"
            try:
                action = _call(agent.act, observation)
            except BudgetExceeded as exc:
                self._agent_stopped(exc, exc.kind)
                return exc.kind
            except AgentFormatError as exc:
                self._agent_stopped(exc, "format_error")
                return "format_error"
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - an agent crash autosubmits
                self.writer.write("agent_stop", {"reason": "agent_error",
                                                 "message": f"{type(exc).__name__}: {exc}",
                                                 "traceback": traceback.format_exc()})
                self._agent_error = f"{type(exc).__name__}: {exc}"
                return "agent_error"
            if not isinstance(action, Action):
                self._agent_error = f"agent returned {type(action).__name__}, not an Action"
                return "agent_error"
            self.step_index += 1
            self.status.steps = self.step_index
            self.status.usage.add(action.usage)
            started = time.time()
            t0 = time.monotonic()
            ctx.step = self.step_index
            remaining = self.status.time_left_s
            ctx.action_timeout_s = (budget.action_timeout_s if remaining is None
                                    else max(1.0, min(budget.action_timeout_s, remaining)))
            self.progress("action", {"index": self.step_index, "action": action, "status": self.status})
            observation = self._execute(action, ctx)
            duration = time.monotonic() - t0
            step = Step(index=self.step_index, action=action, observation=observation,
                        started_at=started, duration_s=round(duration, 6),
                        elapsed_s=round(self.status.elapsed_s, 3))
            self.writer.step(step)
            self.completed_steps = self.step_index
            self._lifecycle("rgym_step", episode=self.info, step=step)
            self.progress("step", {"step": step, "status": self.status})
            if observation.info.get("sandbox_error"):
                return "sandbox_error"
            if observation.done:
                return "submit"
            limit = budget.cost_limit_usd
            if limit is not None and self.status.usage.cost_usd >= limit:
                return "cost"
            if budget.token_limit is not None and self.status.usage.tokens >= budget.token_limit:
                return "tokens"

    def _agent_stopped(self, exc: Exception, reason: str) -> None:
        """Record an agent's stop, counting the model usage of its unfinished action
        (agents attach ``usage`` and ``llm_calls`` to the exception)."""
        self._agent_error = f"{type(exc).__name__}: {exc}"
        usage = getattr(exc, "usage", None)
        if usage is not None:
            self.status.usage.add(usage)
        self.writer.write("agent_stop", {"reason": reason, "message": str(exc),
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
            if failure is not None:
                info["sandbox_error"] = failure.reason
                res.output += f"\n[the sandbox failed: {failure}]"
        return Observation(output=res.output, error=res.error, exit_code=exit_code,
                           truncated=bool(info.get("truncated")), score=res.score,
                           done=res.submit, info=info)

    def _record(self, key: str, value: Any) -> None:
        self._pending_info[key] = value

    def _grade(self, kind: str) -> ScoreRecord:
        self.progress("grading", {"kind": kind})
        record = self.grader.grade(kind, self.step_index)
        self.scores.append(record)
        self.writer.score(record)
        return record

    def _final_grading(self, result: EpisodeResult, end_reason: str) -> None:
        kind = "submit" if end_reason == "submit" else "autosubmit"
        record = self._grade(kind)
        if record.valid:
            result.final_scores = dict(record.scores)
            result.status = (ExitStatus.SUBMITTED if kind == "submit"
                             else ExitStatus(f"autosubmitted_{end_reason}"))
        else:
            missing = record.details.get("missing_submission")
            result.status = ExitStatus.SUBMISSION_MISSING if missing else ExitStatus.EVALUATION_ERROR
            result.error = record.error
        result.agent_error = self._agent_error

    def _lifecycle(self, hook: str, **kwargs: Any) -> None:
        for impl in getattr(self.registry.hook, hook).get_hookimpls():
            try:
                impl.function(**kwargs)
            except Exception as exc:  # noqa: BLE001 - observers never end an episode
                self.writer.write("hook_error", {"hook": hook, "plugin": impl.plugin_name,
                                                 "error": f"{type(exc).__name__}: {exc}"})

    def _finish(self, sandbox: Sandbox | None, ctx: ToolContext | None, result: EpisodeResult) -> None:
        result.scores = list(self.scores)
        result.steps = self.completed_steps
        usage = self.status.usage
        result.cost_usd = round(usage.cost_usd, 6)
        result.input_tokens = usage.input_tokens
        result.output_tokens = usage.output_tokens
        if ctx is not None:
            for tool in self.tools.values():
                ctx.tool_config = self.task.tool_config.get(tool.namespace, {})
                try:
                    tool.stop(ctx)
                except Exception as exc:  # noqa: BLE001
                    self.writer.write("hook_error", {"tool": tool.qualified_name, "error": repr(exc)})
        if sandbox is not None:
            if self.config.archive_workspace:
                try:
                    self._archive(sandbox)
                except Exception as exc:  # noqa: BLE001
                    self.writer.write("archive_error", {"error": repr(exc)})
            try:
                sandbox.cleanup()
            except Exception as exc:  # noqa: BLE001
                self.writer.write("cleanup_error", {"error": repr(exc)})
        result.ended_at = time.time()
        result.duration_s = round(result.ended_at - result.started_at, 3)
        (self.run_dir / RESULT_FILE).write_text(dumps(result, indent=2))
        self.writer.end(result)
        if self.info is not None:
            self._lifecycle("rgym_episode_end", episode=self.info, result=result)
        self.writer.close()
        self.progress("end", {"result": result})

    def _archive(self, sandbox: Sandbox) -> None:
        with tempfile.TemporaryDirectory(prefix="rgym-archive-") as tmp:
            listing = sandbox.exec(["ls", "-A1"], timeout=60)
            mounts = {m.mount.split("/", 1)[0] for m in self.task.datasets}
            root = Path(tmp) / "workspace"
            root.mkdir()
            for entry in listing.output.splitlines():
                if entry and entry not in mounts:
                    sandbox.copy_out(entry, root / entry)
            with tarfile.open(self.run_dir / "workspace.tar.gz", "w:gz") as tar:
                tar.add(root, arcname="workspace")


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return str(exc)
    name = {FileNotFoundError: "No such file or directory", PermissionError: "Permission denied",
            IsADirectoryError: "Is a directory", NotADirectoryError: "Not a directory",
            FileExistsError: "File exists"}.get(type(exc), type(exc).__name__)
    target = getattr(exc, "filename", None)
    return f"{name}: {target}" if target else f"{name}: {exc}"


def run_episode(config: RunConfig, registry: Registry | None = None, *, agent: Agent | None = None,
                progress: ProgressCallback | None = None) -> EpisodeResult:
    """Run one episode and return its result (also written to the run directory).

    Raises :class:`RunError` when the episode cannot be set up (unknown task,
    agent or sandbox, missing dataset); everything that goes wrong after the run
    directory exists ends up in the result instead.
    """
    registry = registry or load_registry()
    episode = Episode(config, registry, agent=agent, progress=progress)
    return episode.run()

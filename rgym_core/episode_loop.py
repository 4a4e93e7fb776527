"""The step loop of an episode: ask the agent, run the action's tool, record the step.

:class:`EpisodeLoop` is the part of :class:`rgym_core.runner.Episode` that runs
once the sandbox has started: it starts the tools and the agent (and resumes it
for ``rgym run --resume``), then loops agent -> tool -> observation until the
agent submits, a budget ends (steps, wall-clock, cost, tokens) or the agent
fails, and returns why it ended.  Every step is appended to ``trajectory.jsonl``
as it happens and the ``rgym_step`` hook is called.  The agent's methods may be
sync or ``async`` (:class:`_AgentLoop`).  What comes after the loop (the final
grading, the archive and the result) is :mod:`rgym_core.episode_finish`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rgym_core.agents import Agent, AgentFormatError, BudgetExceeded, EpisodeStatus, TaskContext
from rgym_core.episode import EpisodeInfo, LifecycleHooks
from rgym_core.episode_plan import ProgressCallback, RunConfig
from rgym_core.records import Action, EndReason, Observation, Step
from rgym_core.rundir import TrajectoryWriter
from rgym_core.sandbox import Sandbox, SandboxError
from rgym_core.serialization import unstructure
from rgym_core.specs import Budget, PreparedDataset, TaskSpec
from rgym_core.tools import Tool, ToolContext, ToolError, ToolResult

#: ``SandboxError.reason`` values the agent's own processes cause (memory, processes,
#: disk used up): a command they kill is an observation; a sandbox they break ends the
#: episode as the agent's failure (``agent_error``), never as a retryable sandbox error.
AGENT_CAUSED = frozenset({"oom", "pids", "disk"})


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


class EpisodeLoop:
    """The step loop of :class:`rgym_core.runner.Episode` (a part of it: the
    attributes below are the episode's)."""

    config: RunConfig
    task: TaskSpec
    profile: str | None
    budget: Budget
    run_id: str
    run_dir: Path
    agent_name: str
    sandbox_name: str
    resume: Any
    progress: ProgressCallback
    status: EpisodeStatus
    tools: dict[str, Tool]
    writer: TrajectoryWriter
    hooks: LifecycleHooks
    info: EpisodeInfo | None
    step_index: int
    completed_steps: int
    _prepared: tuple[list[Tool], dict[str, PreparedDataset], Agent] | None
    _loop: _AgentLoop
    _agent_closed: bool
    _agent_error: str | None
    _pending_info: dict[str, Any]
    _state_failed: bool

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

    def _hook_error(self, hook: str, plugin: str, exc: BaseException) -> None:
        self.writer.write("hook_error", {
            "hook": hook, "plugin": plugin, "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))})

    def _run_loop(self, sandbox: Sandbox, ctx: ToolContext, agent: Agent) -> EndReason:
        """Start the tools and the agent, loop (:meth:`_steps`) and close the agent;
        returns why the episode ended."""
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
        return end_reason

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


__all__ = ["AGENT_CAUSED", "EpisodeLoop"]

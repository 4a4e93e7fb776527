"""The runner's side of ``--agent-isolation process``.

:class:`ProcessAgent` is an ordinary agent for the runner (``start``, ``act``,
``close``, ``model_clients``) that runs the real scaffold in a confined child
process (:mod:`rgym_core.isolation.agent_confinement`) and speaks the protocol of
:mod:`rgym_core.agent_process.protocol` with it.  Whatever the child does --
crash, hang, flood the pipe, write garbage, lie about its usage -- ends as an
agent error (or, past the episode's time limit, the ``time`` budget) of that
episode, graded as an autosubmission; the runner itself never fails because of it.

Model calls: :class:`ModelGateway` builds the clients the scaffold asks for with
the registered LLM providers (only the model and endpoint the user chose, only
options the user gave or harmless ones), checks the episode's cost and token
limits before every call, counts the usage and records each call it made (model,
prompt, reply, tokens, cost, latency: :meth:`ModelGateway.take_calls`).  The
action's ``usage`` and ``llm_calls`` are the runner's count and records, never the
scaffold's claims: what the scaffold says about its own calls is left out of the
trajectory, the result and every export, and only noted (``reported by the
scaffold, unverified``) in ``agent_process.log``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from attrs import define

from rgym_core.agent_process.protocol import (
    PROTOCOL_VERSION,
    STOP_REASONS,
    Channel,
    ChannelClosed,
    ChannelTimeout,
    ProtocolError,
    error_payload,
)
from rgym_core.agents import (
    AgentConfig,
    AgentFormatError,
    BudgetExceeded,
    EpisodeStatus,
    TaskContext,
)
from rgym_core.isolation.agent_confinement import CORE_DISTRIBUTION, LaunchPlan, plan_launch
from rgym_core.records import Action, EndReason, Observation, Usage
from rgym_core.serialization import unstructure
from rgym_core.specs import Budget

log = logging.getLogger(__name__)

#: The file in the run directory that keeps what the agent process printed.
LOG_FILE = "agent_process.log"
#: Client options a scaffold may set itself; any other needs the user's ``--agent-option``.
SAFE_CLIENT_OPTIONS = frozenset({"connect_timeout", "read_timeout", "max_attempts", "max_wait_s",
                                 "backoff_initial_s", "backoff_max_s", "stream", "max_tokens",
                                 "temperature", "top_p"})
#: At most this many notes of the scaffold's own usage claims go to the log.
MAX_REPORTED_NOTES = 50
#: Facts of ``TaskContext.sandbox_facts`` the scaffold gets (no host paths, no users).
SANDBOX_FACTS = ("backend", "memory", "memory_mb", "cpus", "gpus", "network", "pids")


class AgentProcessError(RuntimeError):
    """The agent process failed or broke the protocol; the message says how."""


class RemoteTraceback(Exception):
    """The scaffold's own traceback (chained to :class:`AgentProcessError`, so the
    runner's ``agent_stop`` record shows where the scaffold failed)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0] if self.args else "")


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        parsed = float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected seconds") from None
    if parsed <= 0:
        raise ValueError(f"{name}={value!r}: must be positive")
    return parsed


@define(frozen=True)
class IsolationSettings:
    """Timeouts of the agent process (environment variables in brackets).

    ``init_timeout_s`` (``RGYM_AGENT_INIT_TIMEOUT``, 120): starting the process
    and building the agent.  ``idle_timeout_s`` (``RGYM_AGENT_IDLE_TIMEOUT``,
    600): the longest the scaffold may compute without a message (model calls
    the runner makes for it do not count).  ``grace_s``: how long past the
    episode's time limit an action may take before the ``time`` budget ends it.
    """

    init_timeout_s: float = 120.0
    idle_timeout_s: float = 600.0
    close_timeout_s: float = 5.0
    grace_s: float = 10.0
    max_clients: int = 8
    log_bytes: int = 256 << 10

    @classmethod
    def from_env(cls) -> IsolationSettings:
        return cls(init_timeout_s=_env_float("RGYM_AGENT_INIT_TIMEOUT", 120.0),
                   idle_timeout_s=_env_float("RGYM_AGENT_IDLE_TIMEOUT", 600.0))


class _StderrLog:
    """Drains the agent's standard error in a thread, keeping its head and tail."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self._thread = threading.Thread(target=self._drain, name="rgym-agent-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    break
                room = self._limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self._limit:
                        cut = len(self.tail) - self._limit
                        self.dropped += cut
                        del self.tail[:cut]
        except OSError:
            pass
        finally:
            try:
                os.close(self._fd)
            except OSError:
                pass

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        body = bytes(self.head)
        if self.dropped:
            body += f"\n[... {self.dropped} bytes not kept ...]\n".encode()
        body += bytes(self.tail)
        return body.decode("utf-8", "replace")

    def last_lines(self, count: int = 8) -> str:
        lines = self.text().strip().splitlines()[-count:]
        return "\n".join(line[:300] for line in lines)


class _PendingStatus:
    """The episode's status plus the usage of the action in progress (the runner
    adds it only when ``act`` returns), as model clients' ``status``."""

    def __init__(self, status: EpisodeStatus, pending: Usage) -> None:
        self._status = status
        self._pending = pending

    @property
    def budget(self) -> Budget:
        return self._status.budget

    def check_cost(self, estimated_usd: float, estimated_tokens: int = 0) -> None:
        self._status.check_cost(estimated_usd + self._pending.cost_usd,
                                estimated_tokens + self._pending.tokens)


class ModelGateway:
    """The runner's side of the scaffold's model calls (see the module docstring)."""

    def __init__(self, config: AgentConfig, registry: Any, *, max_clients: int = 8) -> None:
        self.model = config.model
        self.base_url = config.base_url
        self.user_options = dict(config.options)
        self.registry = registry
        self.max_clients = max_clients
        self.clients: list[Any] = []
        #: Budgets the runner refused a call for during the current action.
        self.refused: set[str] = set()
        #: The records of the calls made for the current action (see :meth:`take_calls`).
        self.calls: list[dict[str, Any]] = []
        self._last_sent: dict[int, list[dict[str, Any]]] = {}
        self._last_tools: dict[int, str] = {}

    def take_calls(self) -> list[dict[str, Any]]:
        """The records of the model calls made since the last ``take_calls`` (and
        forget them): one per call, in the shape in-process agents such as react
        record (``model``, ``prefix_messages``/``prefix_sha256``/``messages``,
        ``n_messages``, ``tools_sha256``/``tools``, ``response``, ``tool_calls``,
        ``stop_reason``, ``input_tokens``, ``output_tokens``, ``cost_usd``,
        ``latency_s``), plus ``"recorded_by": "runner"``."""
        calls, self.calls = self.calls, []
        return calls

    def create(self, params: dict[str, Any]) -> dict[str, Any]:
        model = params.get("model")
        base_url = params.get("base_url")
        options = params.get("options") or {}
        if not isinstance(model, str) or not isinstance(options, dict):
            raise _Refused("model.create needs a model name and an options mapping")
        if self.model is None:
            raise _Refused(f"the agent asked for model '{model}', but no --model was given")
        if model != self.model:
            raise _Refused(f"the agent asked for model '{model}'; with --agent-isolation process "
                           f"it may use only the model given with --model ({self.model})")
        if base_url not in (None, self.base_url):
            raise _Refused(f"the agent asked for the endpoint {base_url!r}; with --agent-isolation "
                           f"process it may use only --base-url ({self.base_url or 'the default'})")
        for key, value in options.items():
            if key in self.user_options and self.user_options[key] == value:
                continue
            if key in SAFE_CLIENT_OPTIONS and (value is None or isinstance(value, str | int | float | bool)):
                continue
            raise _Refused(f"the agent set the model option '{key}', which only the user may set "
                           f"(--agent-option {key}=...)")
        if len(self.clients) >= self.max_clients:
            raise _Refused(f"the agent created more than {self.max_clients} model clients")
        client = self.registry.create_model_client(model, base_url=self.base_url, **options)
        self.clients.append(client)
        price = getattr(client, "price", None)
        try:
            price_data = unstructure(price) if price is not None else None
        except Exception:  # noqa: BLE001 - a price the converter does not know: omit it
            price_data = None
        return {"client": len(self.clients) - 1, "model": getattr(client, "model", model),
                "provider": getattr(client, "provider", None), "price": price_data}

    def complete(self, params: dict[str, Any], status: EpisodeStatus | None, pending: Usage) -> dict[str, Any]:
        handle = params.get("client")
        if not isinstance(handle, int) or not 0 <= handle < len(self.clients):
            raise _Refused(f"no model client {handle!r}")
        if status is None:
            raise _Refused("model calls are allowed from start() on")
        messages = params.get("messages")
        tools = params.get("tools")
        max_tokens = params.get("max_tokens")
        temperature = params.get("temperature")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise _Refused("messages must be a list of objects")
        if tools is not None and not isinstance(tools, list):
            raise _Refused("tools must be a list or null")
        if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                       or max_tokens < 1):
            raise _Refused("max_tokens must be a positive integer or null")
        if temperature is not None and not isinstance(temperature, int | float):
            raise _Refused("temperature must be a number or null")
        client = self.clients[handle]
        started = time.monotonic()
        try:
            response = client.complete(messages, tools=tools, max_tokens=max_tokens,
                                       temperature=temperature,
                                       status=_PendingStatus(status, pending))
        except BudgetExceeded as exc:
            self.refused.add(exc.kind.value)
            raise
        latency = time.monotonic() - started
        pending.add(response.usage)
        self.calls.append(self._record(handle, client, messages, tools, response, latency))
        data = unstructure(response)
        return data if isinstance(data, dict) else {}

    def _record(self, handle: int, client: Any, messages: list[dict[str, Any]],
                tools: list[Any] | None, response: Any, latency: float) -> dict[str, Any]:
        """The record of one call the runner made (messages kept compact, as react
        does: the leading messages equal to the previous call's on this client are
        only counted and hashed)."""
        previous = self._last_sent.get(handle, [])
        prefix = 0
        for old, new in zip(previous, messages, strict=False):
            if old != new:
                break
            prefix += 1
        usage = response.usage
        record: dict[str, Any] = {
            "model": str(getattr(client, "model", None) or self.model), "recorded_by": "runner",
            "prefix_messages": prefix, "prefix_sha256": _digest(messages[:prefix]) if prefix else None,
            "messages": messages[prefix:], "n_messages": len(messages)}
        if tools:
            digest = _digest(tools)
            record["tools_sha256"] = digest
            if self._last_tools.get(handle) != digest:
                record["tools"] = tools
                self._last_tools[handle] = digest
        record.update({
            "response": response.text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in response.tool_calls],
            "stop_reason": response.stop_reason,
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cost_usd": round(usage.cost_usd, 8), "latency_s": round(latency, 3)})
        raw_usage = response.raw.get("_usage") if isinstance(response.raw, dict) else None
        if isinstance(raw_usage, dict) and raw_usage.get("estimated"):
            record["tokens_estimated"] = True
        retries = response.raw.get("_retries") if isinstance(response.raw, dict) else None
        if isinstance(retries, list) and retries:  # failed attempts before this answer
            record["attempts"] = len(retries) + 1
            record["retries"] = retries
        self._last_sent[handle] = messages
        return record


class _Refused(Exception):
    """A model request the gateway does not allow."""


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _error_reply(exc: BaseException) -> dict[str, Any]:
    payload = error_payload(exc)
    payload.pop("traceback", None)
    if isinstance(exc, BudgetExceeded):
        kind = "budget"
        payload["budget"] = exc.kind.value
    elif isinstance(exc, _Refused):
        kind = "refused"
    elif isinstance(exc, ValueError | LookupError) or type(exc).__name__ == "ModelConfigError":
        kind = "config"
    else:
        kind = "model"
    for attr in ("provider", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, str | int):
            payload[attr] = value
    return {**payload, "kind": kind}


class ProcessAgent:
    """An untrusted scaffold in its own confined process (see the module docstring).

    Built before the run directory exists: the process starts and the scaffold's
    factory runs, so a missing key or a bad option stops the run with a usage error.
    """

    def __init__(self, registration: Any, config: AgentConfig, *, registry: Any,
                 budget: Budget | None = None, settings: IsolationSettings | None = None) -> None:
        self.name: str = registration.name
        self.distribution: str = registration.distribution
        self.config = config
        self.settings = settings or IsolationSettings.from_env()
        self.gateway = ModelGateway(config, registry, max_clients=self.settings.max_clients)
        self.budget = budget or Budget()
        self._status: EpisodeStatus | None = None
        self._pending = Usage()
        self._failure: Exception | None = None
        self._closed = False
        self._broken = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._stderr: _StderrLog | None = None
        self._acts = 0
        #: What the scaffold claimed about its own model calls (for agent_process.log only).
        self._reported: list[str] = []
        extra = [config.run_dir.parents[2]] if config.run_dir and len(config.run_dir.parents) > 2 else []
        self.plan: LaunchPlan = plan_launch(registry, self.distribution, extra_hidden=extra)
        self._finalizer = weakref.finalize(self, _kill_plan, None, self.plan)
        try:
            self._spawn()
            deadline = time.monotonic() + self.settings.init_timeout_s
            self._send({"type": "init", "protocol": PROTOCOL_VERSION,
                        "agent": {"name": self.name, "plugin": registration.plugin,
                                  "distribution": self.distribution},
                        "config": {"model": config.model, "base_url": config.base_url,
                                   "seed": config.seed, "options": dict(config.options),
                                   "task_id": config.task_id, "profile": config.profile},
                        "budget": unstructure(self.budget)}, deadline)
            self._wait_for(("ready",), deadline=deadline, phase="starting")
        except BaseException:
            self.close()
            raise

    @property
    def confinement(self) -> str:
        """How the process is confined here (``bubblewrap+uid``, ``bubblewrap``, ``uid``)."""
        return self.plan.confinement.mode

    # -- the agent protocol ------------------------------------------------------------

    def model_clients(self) -> list[Any]:
        """The clients built for the scaffold (checked by the runner before the episode)."""
        return list(self.gateway.clients)

    def start(self, context: TaskContext) -> None:
        self._status = context.status
        message = {"type": "start", "context": self._context(context), "status": self._counters()}
        try:
            self._exchange(message, ("started",), phase="start")
        except (AgentProcessError, BudgetExceeded) as exc:
            # reported at the first act, so the episode ends as an agent error (or a budget)
            # and the workspace is still graded
            self._failure = exc

    def act(self, observation: Observation) -> Action:
        try:
            return self._act(observation)
        except Exception as exc:
            # the records of the calls the runner made for the unfinished action
            # (the runner writes them with the agent's stop); never the scaffold's
            calls = self.gateway.take_calls()
            try:
                exc.llm_calls = calls  # type: ignore[attr-defined]
            except AttributeError:  # pragma: no cover - an exception class with slots
                pass
            raise

    def _act(self, observation: Observation) -> Action:
        self._acts += 1
        if self._failure is not None:
            failure, self._failure = self._failure, None
            if not isinstance(failure, BudgetExceeded):
                self._spend_pending()
            raise failure
        info = {k: v for k, v in observation.info.items() if k != "traceback"}
        data = unstructure(observation)
        data["info"] = _json_safe(info)
        reply = self._exchange({"type": "act", "observation": data, "status": self._counters()},
                               ("action", "stop"), phase="act")
        if reply["type"] == "stop":
            raise self._stopped(reply)
        action = self._action(reply.get("action"))
        action.usage, self._pending = self._pending, Usage()
        action.llm_calls = self.gateway.take_calls()
        self.gateway.refused.clear()
        return action

    def close(self) -> None:
        """Ask the scaffold to close, then end its process tree and free its uid."""
        if self._closed:
            return
        self._closed = True
        try:
            if (self._channel is not None and self._proc is not None and not self._broken
                    and self._proc.poll() is None):
                deadline = time.monotonic() + self.settings.close_timeout_s
                try:
                    self._send({"type": "close"}, deadline)
                    self._wait_for(("closed",), deadline=deadline, phase="close", serve=False)
                except (AgentProcessError, BudgetExceeded):
                    pass
        finally:
            self._terminate()
            self._write_log()

    # -- plumbing ----------------------------------------------------------------------

    def _spawn(self) -> None:
        plan = self.plan
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                plan.argv, stdin=to_child_r, stdout=from_child_w, stderr=err_w, env=plan.env,
                cwd=plan.cwd, pass_fds=plan.pass_fds, start_new_session=True, close_fds=True)
        except OSError as exc:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w, err_r, err_w):
                os.close(fd)
            raise AgentProcessError(f"could not start the agent process: {exc}") from None
        finally:
            if self._proc is not None:
                for fd in (to_child_r, from_child_w, err_w):
                    os.close(fd)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _kill_plan, self._proc.pid, plan)
        for close in list(plan._closers):  # the memfds of bubblewrap's data files
            close()
        plan._closers.clear()
        self._channel = Channel(from_child_r, to_child_w)
        self._stderr = _StderrLog(err_r, self.settings.log_bytes)

    def _send(self, message: dict[str, Any], deadline: float) -> None:
        assert self._channel is not None
        try:
            self._channel.send(message, deadline=deadline)
        except ProtocolError as exc:
            raise self._died(str(exc)) from None

    def _exchange(self, message: dict[str, Any], expect: tuple[str, ...], *, phase: str) -> dict[str, Any]:
        try:
            self._send(message, time.monotonic() + self.settings.idle_timeout_s)
            return self._wait_for(expect, deadline=None, phase=phase)
        except KeyboardInterrupt:
            self._broken = True  # interrupted mid-action: close() kills it without asking
            raise

    def _time_deadline(self) -> float | None:
        status = self._status
        if status is None or status.budget.time_limit_s is None:
            return None
        return status.started_at + status.budget.time_limit_s + self.settings.grace_s

    def _wait_for(self, expect: tuple[str, ...], *, deadline: float | None, phase: str,
                  serve: bool = True) -> dict[str, Any]:
        """Serve the scaffold's calls until one of ``expect`` arrives."""
        assert self._channel is not None
        idle = self.settings.idle_timeout_s
        while True:
            now = time.monotonic()
            limits = [now + idle]
            if deadline is not None:
                limits.append(deadline)
            budget_deadline = self._time_deadline() if phase in ("start", "act") else None
            if budget_deadline is not None:
                limits.append(budget_deadline)
            until = min(limits)
            try:
                message = self._channel.receive(deadline=until)
            except ChannelTimeout:
                if budget_deadline is not None and time.monotonic() >= budget_deadline:
                    exc = BudgetExceeded(EndReason.TIME, "the agent process was still working on its "
                                                         "action when the time limit was reached")
                    exc.usage, self._pending = self._pending, Usage()  # type: ignore[attr-defined]
                    self._kill()
                    raise exc from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._died(f"the agent process did not finish {phase} in time "
                                     "(RGYM_AGENT_INIT_TIMEOUT)", kill=True) from None
                raise self._died(f"the agent process sent nothing for {idle:g} s during {phase} "
                                 "(RGYM_AGENT_IDLE_TIMEOUT)", kill=True) from None
            except ProtocolError as exc:
                raise self._died(str(exc), kill=not isinstance(exc, ChannelClosed)) from None
            kind = message["type"]
            if kind == "call" and serve:
                self._serve(message)
                continue
            if kind in expect:
                return message
            if kind == "failed":
                raise self._remote_failure(message, phase)
            raise self._died(f"the agent process sent an unexpected '{kind[:40]}' message during "
                             f"{phase}", kill=True)

    def _serve(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            params = {}
        reply: dict[str, Any] = {"type": "result", "id": ident}
        try:
            if method == "model.create":
                reply["result"] = self.gateway.create(params)
            elif method == "model.complete":
                reply["result"] = self.gateway.complete(params, self._status, self._pending)
            else:
                raise _Refused(f"unknown method {str(method)[:60]!r}")
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the scaffold
            reply["error"] = _error_reply(exc)
        self._send(reply, time.monotonic() + self.settings.idle_timeout_s)

    def _counters(self) -> dict[str, Any]:
        status = self._status
        if status is None:
            return {}
        return {"steps": status.steps, "elapsed_s": status.elapsed_s,
                "usage": unstructure(status.usage), "snapshot": _json_safe(status.snapshot())}

    def _context(self, context: TaskContext) -> dict[str, Any]:
        facts = {k: v for k, v in (context.sandbox_facts or {}).items() if k in SANDBOX_FACTS}
        data: dict[str, Any] = {
            "task_id": context.task_id, "description": context.description,
            "tools": [unstructure(t) for t in context.tools],
            "metrics": [unstructure(m) for m in context.metrics],
            "baseline_scores": dict(context.baseline_scores),
            "baseline_command": context.baseline_command,
            "resources": unstructure(context.resources), "workspace": context.workspace,
            "seed": context.seed, "sandbox_facts": _json_safe(facts),
        }
        if self.distribution == CORE_DISTRIBUTION:  # the core's reference agents only
            data["scripted_actions"] = _json_safe(context.scripted_actions)
        return data

    def _action(self, data: Any) -> Action:
        def bad(why: str) -> AgentProcessError:
            self._spend_pending()
            self._kill()  # it broke the protocol: no polite close
            return AgentProcessError(f"the agent process sent an invalid action: {why}")

        if not isinstance(data, dict):
            raise bad("not an object")
        tool = data.get("tool")
        if not isinstance(tool, str) or not tool or len(tool) > 200:
            raise bad("'tool' must be a tool name")
        args = data.get("args") if data.get("args") is not None else {}
        if not isinstance(args, dict):
            raise bad("'args' must be an object")
        texts = {}
        for key in ("thought", "raw", "call_id"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise bad(f"'{key}' must be a string or null")
            texts[key] = value
        calls = data.get("llm_calls") or []
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            raise bad("'llm_calls' must be a list of objects")
        self._note_reported(calls)
        # llm_calls: the runner's own records, set by act() (the scaffold's claims are ignored)
        return Action(tool=tool, args=args, thought=texts["thought"], raw=texts["raw"],
                      call_id=texts["call_id"])

    def _note_reported(self, calls: list[Any]) -> None:
        """Note in ``agent_process.log`` what the scaffold claimed about its own model
        calls (never counted: the runner's records are the action's ``llm_calls``)."""
        if not calls or len(self._reported) >= MAX_REPORTED_NOTES:
            return
        models = sorted({" ".join(str(c.get("model")).split())[:80] for c in calls
                         if isinstance(c, dict)})[:5]
        tokens = {}
        for key in ("input_tokens", "output_tokens", "cost_usd"):
            values = [c.get(key) for c in calls if isinstance(c, dict)]
            tokens[key] = [v if isinstance(v, int | float) and not isinstance(v, bool) else repr(v)[:40]
                           for v in values][:10]
        self._reported.append(f"action {self._acts}: {len(calls)} model call(s) reported by the "
                              f"scaffold, unverified, not counted (the runner made "
                              f"{len(self.gateway.calls)}): models {', '.join(models)}; "
                              + "; ".join(f"{k} {v}" for k, v in tokens.items()))

    def _stopped(self, reply: dict[str, Any]) -> Exception:
        reason = reply.get("reason")
        message = str(reply.get("message") or "")[:2000]
        if isinstance(reply.get("llm_calls"), list):
            self._note_reported(reply["llm_calls"])
        budget = self.budget if self._status is None else self._status.budget
        exc: Exception
        limit_of = {"cost": budget.cost_limit_usd, "tokens": budget.token_limit,
                    "time": budget.time_limit_s, "max_steps": budget.max_steps}
        if reason in limit_of:
            if limit_of[reason] is None and reason not in self.gateway.refused:
                return self._remote_failure(
                    {**reply, "message": f"the agent reported an exhausted {reason} budget, but the "
                                         f"episode has no {reason} limit ({message})"}, "act")
            exc = BudgetExceeded(str(reason), message)
        elif reason == "format_error":
            exc = AgentFormatError(message)
        elif reason == "agent_error" or reason not in STOP_REASONS:
            return self._remote_failure(reply, "act")
        else:  # pragma: no cover - STOP_REASONS is covered above
            exc = AgentProcessError(message)
        exc.usage, self._pending = self._pending, Usage()  # type: ignore[union-attr]
        self.gateway.refused.clear()  # act() attaches the runner's records as exc.llm_calls
        return exc

    def _remote_failure(self, message: dict[str, Any], phase: str) -> AgentProcessError:
        self._spend_pending()
        error_type = str(message.get("error_type") or "Error").rsplit(".", 1)[-1][:80]
        text = str(message.get("message") or "")[:2000]
        where = "while starting" if phase == "starting" else f"in {phase}()"
        exc = AgentProcessError(f"{error_type}: {text} (the agent raised {where}, in its own process)")
        tb = message.get("traceback")
        if isinstance(tb, str) and tb:
            exc.__cause__ = RemoteTraceback(tb[-8000:])
        return exc

    def _died(self, why: str, *, kill: bool = False) -> AgentProcessError:
        """The error for a process that broke the protocol or exited (killed first when ``kill``)."""
        if kill:
            self._kill()
        self._spend_pending()
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._kill()
        if self._stderr is not None:
            self._stderr.join(1.0)
        detail = why
        if code is not None and not kill:
            detail += f"; exit status {_describe_exit(code)}"
        tail = self._stderr.last_lines() if self._stderr is not None else ""
        if tail:
            detail += f"; its last output:\n{tail}"
        return AgentProcessError(detail)

    def _spend_pending(self) -> None:
        """Count the usage of an action that will not return (the runner adds only
        a returned action's usage and a budget stop's)."""
        if self._status is not None and (self._pending.calls or self._pending.cost_usd):
            self._status.usage.add(self._pending)
        self._pending = Usage()

    def _kill(self) -> None:
        self._broken = True
        if self._proc is not None and self._proc.poll() is None:
            _kill_group(self._proc.pid)

    def _terminate(self) -> None:
        proc = self._proc
        sandbox_pid = self.plan.sandbox_pid()
        if sandbox_pid is not None:  # the sandbox's pid 1: the kernel ends its whole namespace
            _kill_and_wait(sandbox_pid)
        if proc is not None:
            if proc.poll() is None:
                _kill_group(proc.pid)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("rgym: the agent process %s did not exit after SIGKILL", proc.pid)
        if self._channel is not None:
            self._channel.close()
        if self._stderr is not None:
            self._stderr.join(2.0)
        self.plan.release()
        self._finalizer.detach()

    def _write_log(self) -> None:
        run_dir = self.config.run_dir
        if run_dir is None or self._stderr is None or not Path(run_dir).is_dir():
            return
        text = self._stderr.text()
        header = (f"# agent {self.name} ({self.distribution}) in its own process; confinement: "
                  f"{self.confinement}\n")
        for note in self._reported:
            header += f"# rgym: {note}\n"
        try:
            (Path(run_dir) / LOG_FILE).write_text(header + text, encoding="utf-8")
        except OSError as exc:
            log.warning("rgym: could not write %s: %s", LOG_FILE, exc)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"{-code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _kill_and_wait(pid: int, timeout: float = 5.0) -> None:
    """SIGKILL ``pid`` (not our child) and wait until it is gone or a zombie."""
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def _kill_plan(pid: int | None, plan: LaunchPlan) -> None:
    """Last resort (the agent was dropped without ``close``): kill and release."""
    sandbox_pid = plan.sandbox_pid()
    if sandbox_pid is not None:
        _kill_and_wait(sandbox_pid, timeout=1.0)
    if pid is not None:
        _kill_group(pid)
    plan.release()


def _json_safe(value: Any) -> Any:
    """``value`` with anything JSON cannot carry turned into strings."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        plain = unstructure(value)
    except Exception:  # noqa: BLE001
        return str(value)
    if isinstance(plain, dict | list | str | int | float | bool) or plain is None:
        return _json_safe(plain)
    return str(value)


__all__ = ["LOG_FILE", "SAFE_CLIENT_OPTIONS", "AgentProcessError", "IsolationSettings",
           "ModelGateway", "ProcessAgent"]

"""The scaffold's side of ``--agent-isolation process``: ``python -I -m rgym_core.agent_process.child``.

It reads the runner's messages on standard input and answers on standard output
(:mod:`rgym_core.agent_process.protocol`); everything the scaffold prints goes to
standard error.  It loads only the scaffold's own plugin (from its ``rgym`` entry
point), builds the agent with the registered factory and forwards ``start``,
``act`` and ``close`` to it.

Model clients: inside this process :func:`rgym_core.create_model_client` (and the
``AgentConfig.create_model_client`` the agent is handed)
returns a :class:`ProxyModelClient`, which asks the runner to make each call
(the runner holds the API keys, enforces the cost and token limits and counts
the usage).  A scaffold that opens its own connections finds no network.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import inspect
import os
import sys
import threading
import time
import traceback
from typing import Any

from attrs import define, field

from rgym_core.agent_process.protocol import PROTOCOL_VERSION, decode, encode, error_payload
from rgym_core.agents import (
    AgentConfig,
    AgentFormatError,
    BudgetExceeded,
    EpisodeStatus,
    TaskContext,
)
from rgym_core.models import ModelCheckError, ModelFactory, ModelResponse, ToolCall
from rgym_core.records import Action, Observation, Usage
from rgym_core.serialization import structure, unstructure
from rgym_core.specs import Budget, Metric, Resources
from rgym_core.tools import ToolSchema

#: The entry-point group and the core's built-in plugin (as the registry names them).
ENTRY_POINT_GROUP = "rgym"
BUILTIN_PLUGIN = "builtin"


class RemoteModelError(RuntimeError):
    """A model call the runner made for this scaffold failed; ``error_type`` names
    the runner-side exception class (e.g. ``rgym_llm.errors.ModelRateLimitError``)."""

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type


class _Link:
    """Blocking protocol I/O for the child (the runner is trusted)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._in = os.fdopen(read_fd, "rb", buffering=1 << 16)
        self._out = os.fdopen(write_fd, "wb", buffering=0)
        self._lock = threading.RLock()
        self._next_id = 0

    def read(self) -> dict[str, Any]:
        line = self._in.readline()
        if not line:
            raise EOFError("the runner closed the protocol pipe")
        return decode(line)

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out.fileno(), view):]

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Ask the runner for ``method``; the result, or raise the error it sent."""
        with self._lock:  # one request in flight: answers come back in order
            self._next_id += 1
            ident = self._next_id
            self.send({"type": "call", "id": ident, "method": method, "params": params})
            reply = self.read()
        if reply.get("type") != "result" or reply.get("id") != ident:
            raise RuntimeError(f"protocol error: expected the result of call {ident}, got "
                               f"{reply.get('type')!r}")
        if "error" in reply:
            raise _remote_error(reply["error"] or {})
        result = reply.get("result")
        return result if isinstance(result, dict) else {}


def _remote_error(error: dict[str, Any]) -> BaseException:
    kind = error.get("kind")
    message = str(error.get("message") or "the runner refused the model call")
    if kind == "budget":
        try:
            return BudgetExceeded(str(error.get("budget") or "cost"), message)
        except ValueError:
            return RemoteModelError(message, error.get("error_type"))
    if kind in ("refused", "config"):
        return ModelCheckError(message)
    error_type = error.get("error_type")
    if isinstance(error_type, str) and "." in error_type:
        module_name, _, class_name = error_type.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except Exception:  # noqa: BLE001 - not importable here: a generic error
            cls = None
        if isinstance(cls, type) and issubclass(cls, Exception):
            for kwargs in ({}, {"provider": error.get("provider") or "rgym"}):
                try:
                    exc = cls(message, **kwargs)
                except Exception:  # noqa: BLE001 - another constructor: try the next form
                    continue
                if kwargs and error.get("status") is not None:
                    try:
                        setattr(exc, "status", error["status"])  # noqa: B010 - unknown class
                    except AttributeError:
                        pass
                return exc
    return RemoteModelError(message, error_type if isinstance(error_type, str) else None)


class ProxyModelClient:
    """A model client whose calls the runner makes (see the module docstring).

    It follows :class:`rgym_core.models.ModelClient`; ``status`` is accepted and
    ignored, because the runner checks the episode's limits itself.
    """

    def __init__(self, link: _Link, handle: int, model: str, provider: str | None,
                 price: dict[str, Any] | None) -> None:
        self._link = link
        self._handle = handle
        self.model = model
        self.provider = provider
        #: The model's price (USD per million tokens) as the runner knows it, or None.
        self.price_info = price

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 status: Any = None) -> ModelResponse:
        result = self._link.call("model.complete", {
            "client": self._handle, "messages": messages, "tools": tools,
            "max_tokens": max_tokens, "temperature": temperature})
        usage = result.get("usage") or {}
        return ModelResponse(
            text=str(result.get("text") or ""),
            tool_calls=[ToolCall(id=str(c.get("id", "")), name=str(c.get("name", "")),
                                 arguments=dict(c.get("arguments") or {}))
                        for c in result.get("tool_calls") or []],
            usage=Usage(cost_usd=float(usage.get("cost_usd", 0.0)),
                        input_tokens=int(usage.get("input_tokens", 0)),
                        output_tokens=int(usage.get("output_tokens", 0)),
                        calls=int(usage.get("calls", 1))),
            stop_reason=result.get("stop_reason"),
            raw=dict(result.get("raw") or {}))

    def close(self) -> None:
        """Nothing to release here (the runner owns the connection)."""

    def __repr__(self) -> str:
        return f"ProxyModelClient(model={self.model!r}, provider={self.provider!r})"


def install_model_proxy(link: _Link) -> ModelFactory:
    """Make :func:`rgym_core.create_model_client` return proxies in this process;
    the proxying factory, handed to the agent as ``AgentConfig.create_model_client``.

    It replaces the function in :mod:`rgym_core.registry`, where the package's lazy
    export reads it on first use; call it before the scaffold is imported."""
    import rgym_core.registry as registry

    def create_model_client(name: str, *, base_url: str | None = None, registry: Any = None,
                            **options: Any) -> ProxyModelClient:
        result = link.call("model.create", {"model": name, "base_url": base_url, "options": options})
        return ProxyModelClient(link, int(result["client"]), str(result.get("model") or name),
                                result.get("provider"), result.get("price"))

    create_model_client.__doc__ = registry.create_model_client.__doc__
    registry.create_model_client = create_model_client
    return create_model_client


@define
class MirrorStatus(EpisodeStatus):
    """The episode's live counters as the runner last sent them (``TaskContext.status``
    in this process); ``snapshot()`` adds the runner's own facts (tools' status...)."""

    host_snapshot: dict[str, Any] = field(factory=dict)

    def update(self, data: dict[str, Any] | None) -> None:
        if not data:
            return
        self.steps = int(data.get("steps", self.steps))
        usage = data.get("usage") or {}
        self.usage = Usage(cost_usd=float(usage.get("cost_usd", 0.0)),
                           input_tokens=int(usage.get("input_tokens", 0)),
                           output_tokens=int(usage.get("output_tokens", 0)),
                           calls=int(usage.get("calls", 0)))
        self.started_at = time.monotonic() - float(data.get("elapsed_s", 0.0))
        snapshot = data.get("snapshot")
        self.host_snapshot = dict(snapshot) if isinstance(snapshot, dict) else {}

    def snapshot(self) -> dict[str, Any]:
        data = dict(self.host_snapshot)
        data.update(super().snapshot())
        return data


def decode_context(data: dict[str, Any], status: MirrorStatus) -> TaskContext:
    """The :class:`TaskContext` the runner sent (see the protocol)."""
    return TaskContext(
        task_id=str(data["task_id"]), description=str(data.get("description", "")),
        tools=[structure(t, ToolSchema, "context.tools", strict=False) for t in data.get("tools", [])],
        budget=status.budget, status=status,
        metrics=[structure(m, Metric, "context.metrics", strict=False) for m in data.get("metrics", [])],
        baseline_scores=dict(data.get("baseline_scores") or {}),
        baseline_command=data.get("baseline_command"),
        resources=structure(data.get("resources") or {}, Resources, "context.resources", strict=False),
        workspace=str(data.get("workspace") or ""), run_dir=None, seed=data.get("seed"),
        scripted_actions=list(data.get("scripted_actions") or []),
        sandbox_facts=dict(data.get("sandbox_facts") or {}))


def load_agent_factory(name: str, plugin: str, distribution: str) -> Any:
    """The registered factory of agent ``name`` from ``plugin`` (an entry point of
    ``distribution`` in the ``rgym`` group), importing nothing else."""
    target: Any = None
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ep.name
        if ep.name == plugin and dist == distribution:
            target = ep.load()
            break
    if target is None and plugin == BUILTIN_PLUGIN:
        target = importlib.import_module("rgym_core.builtin")
    if target is None:
        raise LookupError(f"no '{ENTRY_POINT_GROUP}' entry point '{plugin}' of distribution "
                          f"'{distribution}' in the agent process (agents given as objects "
                          "cannot run with --agent-isolation process)")
    hook = getattr(target, "rgym_register_agents", None)
    if not callable(hook):
        raise LookupError(f"plugin '{plugin}' has no rgym_register_agents hook")
    specs = hook() or []
    for spec in specs if isinstance(specs, list | tuple) else [specs]:
        if getattr(spec, "name", None) == name:
            return spec.factory
    raise LookupError(f"plugin '{plugin}' does not register agent '{name}' in the agent process")


def _call(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        async def wait() -> Any:
            return await result

        return asyncio.run(wait())
    return result


def _failure(exc: BaseException) -> dict[str, Any]:
    return {"type": "failed", **error_payload(exc, traceback_text=traceback.format_exc())}


def _stop(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, BudgetExceeded):
        reason = exc.kind.value
    elif isinstance(exc, AgentFormatError):
        reason = "format_error"
    else:
        reason = "agent_error"
    calls = getattr(exc, "llm_calls", None)
    return {"type": "stop", "reason": reason,
            **error_payload(exc, traceback_text=traceback.format_exc()),
            "llm_calls": calls if isinstance(calls, list) else []}


def encode_action(action: Action) -> dict[str, Any]:
    data = unstructure(action)
    data.pop("usage", None)
    return data


def serve(link: _Link) -> int:
    """The child's whole life: init, then start/act/close until the runner closes."""
    message = link.read()
    if message.get("type") != "init":
        link.send({"type": "failed", "message": f"expected init, got {message.get('type')!r}"})
        return 2
    if message.get("protocol") != PROTOCOL_VERSION:
        link.send({"type": "failed", "message": f"the runner speaks protocol "
                   f"{message.get('protocol')}, this agent process {PROTOCOL_VERSION}"})
        return 2
    create_model_client = install_model_proxy(link)
    info = message.get("agent") or {}
    raw = message.get("config") or {}
    status = MirrorStatus(budget=structure(message.get("budget") or {}, Budget, "budget",
                                           strict=False))
    try:
        factory = load_agent_factory(str(info.get("name")), str(info.get("plugin")),
                                     str(info.get("distribution")))
        agent = factory(AgentConfig(model=raw.get("model"), base_url=raw.get("base_url"),
                                    seed=raw.get("seed"), options=dict(raw.get("options") or {}),
                                    run_dir=None, task_id=raw.get("task_id"),
                                    profile=raw.get("profile"),
                                    create_model_client=create_model_client))
    except BaseException as exc:  # noqa: BLE001 - reported to the runner
        link.send(_failure(exc))
        return 1
    link.send({"type": "ready"})
    while True:
        message = link.read()
        kind = message.get("type")
        if kind == "start":
            status.update(message.get("status"))
            try:
                _call(agent.start, decode_context(message.get("context") or {}, status))
            except BaseException as exc:  # noqa: BLE001
                link.send(_failure(exc))
                continue
            link.send({"type": "started"})
        elif kind == "act":
            status.update(message.get("status"))
            try:
                observation = structure(message.get("observation") or {}, Observation,
                                        "observation", strict=False)
                action = _call(agent.act, observation)
                if not isinstance(action, Action):
                    raise TypeError(f"agent returned {type(action).__name__}, not an Action")
                reply = {"type": "action", "action": encode_action(action)}
            except BaseException as exc:  # noqa: BLE001
                reply = _stop(exc)
            link.send(reply)
        elif kind == "close":
            close = getattr(agent, "close", None)
            if callable(close):
                try:
                    _call(close)
                except BaseException:  # noqa: BLE001 - closing never fails the episode
                    traceback.print_exc()
            link.send({"type": "closed"})
            return 0
        else:
            link.send({"type": "failed", "message": f"unexpected message {kind!r}"})
            return 2


def main() -> int:
    # The protocol owns the original stdin/stdout; the scaffold's prints go to stderr.
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    link = _Link(read_fd, write_fd)
    try:
        return serve(link)
    except EOFError:
        return 0
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

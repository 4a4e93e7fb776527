"""The ReAct loop: prompt, query, parse (re-querying on bad output), record.

``act`` sends the system prompt and the processed history (the last
``history`` observations in full, older ones elided) with a status block, and
turns the reply into an :class:`~rgym_core.records.Action`.  A reply that cannot
be parsed, or that asks for a blocked interactive command, is sent back with
the error, up to ``max_requeries`` times (the failed exchange is not kept in
the history); then :class:`~rgym_core.agents.AgentFormatError` ends the episode.

Every model call is recorded on the returned action (``action.llm_calls``):
the messages sent in a compact form (``prefix_messages`` leading messages equal
to the previous call's, whose SHA-256 is ``prefix_sha256``, then the new
``messages`` in full), the reply, its tool calls, tokens, cost and latency, and
for a call that needed retries its ``attempts`` and each failed attempt
(``retries``: status, error, wait).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import attrs
from attrs import define, field

from rgym_agent_react.blocklist import blocked_reason
from rgym_agent_react.history import History
from rgym_agent_react.prompts import (
    SYSTEM_TEXT,
    SYSTEM_TOOLS,
    observation_text,
    requery_text,
    status_block,
    task_message,
)
from rgym_core import (
    Action,
    AgentConfig,
    AgentFormatError,
    BudgetExceeded,
    CommandFormatError,
    EpisodeStatus,
    ModelClient,
    ModelFactory,
    ModelResponse,
    Observation,
    Step,
    TaskContext,
    ToolCall,
    Usage,
    create_model_client,
    parse_action,
    render_tool_docs,
)


def _mode(value: Any) -> str:
    value = str(value).strip().lower()
    if value not in ("text", "tools"):
        raise ValueError(f"mode must be 'text' or 'tools', got {value!r}")
    return value


def _opt_float(value: Any) -> float | None:
    return None if value in (None, "") or str(value).lower() == "none" else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def _on_off(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no", "none"):
        return False
    raise ValueError(f"status must be 'on' or 'off', got {value!r}")


def _with(text: str, status: str) -> str:
    return f"{text}\n{status}" if status else text


@define
class ReactOptions:
    """The agent's own options (``--agent-option key=value``); any other option
    goes to the model client (``stream``, ``read_timeout``, ``prices``, ``api_key_env``...)."""

    mode: str = field(default="text", converter=_mode)
    history: int = field(default=5, converter=int)
    max_requeries: int = field(default=3, converter=int)
    max_tokens: int | None = field(default=None, converter=_opt_int)
    temperature: float | None = field(default=None, converter=_opt_float)
    #: The agent's own spending limit in USD (MLGym's ``per_instance_cost_limit``):
    #: the model call that reaches it ends the episode, its reply unused, as in MLGym
    #: (``none``: no limit of the agent's; the run's ``--cost-limit`` applies either way).
    cost_limit: float | None = field(default=None, converter=_opt_float)
    #: The budget status after every observation (steps, time and cost left, jobs, memory;
    #: ``status=off`` leaves it out of the conversation).
    status: bool = field(default=True, converter=_on_off)

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[ReactOptions, dict[str, Any]]:
        names = {a.name for a in attrs.fields(cls)}
        mine = {k: v for k, v in options.items() if k in names}
        try:
            return cls(**mine), {k: v for k, v in options.items() if k not in names}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"react agent: bad --agent-option: {exc}") from None


#: MLGym's benchmark settings, the defaults under a task's ``mlgym`` profile (each one
#: overridable with ``--agent-option temperature=...`` / ``top_p=...``).
MLGYM_GENERATION = {"temperature": 0.0, "top_p": 0.95}
#: MLGym's benchmark cost limit per task instance in USD
#: (``scripts/experiments/mlgym_bench_v0/*.sh``: ``--per_instance_cost_limit 4.00``),
#: the default of ``--agent-option cost_limit=...`` under a task's ``mlgym`` profile.
MLGYM_COST_LIMIT_USD = 4.0


class _PendingStatus:
    """The episode status plus what this action already spent on re-queries (the
    runner adds an action's usage only after ``act`` returns)."""

    def __init__(self, status: EpisodeStatus, pending: Usage) -> None:
        self._status = status
        self._pending = pending

    @property
    def budget(self) -> Any:
        return self._status.budget

    def check_cost(self, estimated_usd: float, estimated_tokens: int = 0) -> None:
        self._status.check_cost(estimated_usd + self._pending.cost_usd,
                                estimated_tokens + self._pending.tokens)


def _digest(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


class ReactAgent:
    """The ``react/react`` agent.  ``client`` may be given directly (tests, embedding);
    otherwise it is built from ``config.model`` and ``config.base_url``."""

    def __init__(self, config: AgentConfig, *, client: ModelClient | None = None) -> None:
        self.config = config
        self.options, self.client_options = ReactOptions.split(dict(config.options))
        if config.profile == "mlgym":  # MLGym's generation settings, unless the user chose
            if self.options.temperature is None:
                self.options.temperature = MLGYM_GENERATION["temperature"]
            self.client_options.setdefault("top_p", MLGYM_GENERATION["top_p"])
            if "cost_limit" not in config.options:
                self.options.cost_limit = MLGYM_COST_LIMIT_USD
        self.client = client
        self.context: TaskContext | None = None
        self.history = History(keep=self.options.history)
        self.system = ""
        self.tools: list[dict[str, Any]] | None = None
        self._last_sent: list[dict[str, Any]] = []
        self._last_tools_digest: str | None = None
        self._pending_call_id: str | None = None
        self._note: str | None = None
        self._started = False
        if self.client is None and config.model:
            # Built now, so an unknown provider or a missing key stops the run before it starts.
            self.client = self._model_factory()(config.model, base_url=config.base_url,
                                                **self.client_options)

    def _model_factory(self) -> ModelFactory:
        """The run's factory (its registry, the one ``--plugins`` chose), or outside a
        run the public :func:`rgym_core.create_model_client`."""
        return self.config.create_model_client or create_model_client

    # -- the agent protocol --------------------------------------------------------
    def start(self, context: TaskContext) -> None:
        self.context = context
        if self.client is None:
            if not self.config.model:
                raise ValueError("the react agent needs a model: --model provider/name "
                                 "(e.g. openai-compatible/qwen2.5-7b with --base-url http://HOST:PORT/v1)")
            self.client = self._model_factory()(self.config.model, base_url=self.config.base_url,
                                                **self.client_options)
        if self.options.mode == "tools":
            self.system = SYSTEM_TOOLS
            self.tools = [schema.to_openai() for schema in context.tools]
        else:
            self.system = SYSTEM_TEXT.format(command_docs=render_tool_docs(context.tools))

    def act(self, observation: Observation) -> Action:
        assert self.context is not None and self.client is not None, "start() was not called"
        snapshot = self.context.status.snapshot()
        if snapshot.get("cost_limit_usd") is None and self.options.cost_limit is not None:
            snapshot["cost_limit_usd"] = self.options.cost_limit
        status = status_block(snapshot) if self.options.status else ""
        text = observation_text(observation.output, error=observation.error,
                                exit_code=observation.exit_code, truncated=observation.truncated)
        if self._note:
            text, self._note = f"{self._note}\n{text}", None
        if not self._started:
            self._started = True
            self.history.add({"role": "user",
                              "content": _with(task_message(self.context, text), status)})
        elif self._pending_call_id is not None:
            self.history.add({"role": "tool", "tool_call_id": self._pending_call_id,
                              "content": _with(text, status)}, observation=True)
        else:
            self.history.add({"role": "user", "content": _with(text, status)}, observation=True)
        self._pending_call_id = None
        return self._query()

    def resume(self, steps: list[Step], state: Any = None) -> None:
        """Continue an interrupted episode (``rgym run --resume``): rebuild the
        conversation from the model calls recorded with ``steps``, as it stood after
        them.  Each call's full messages follow from the previous call's
        (``prefix_messages``) and its own; the message ``act`` added at a step is the
        last one its first call sent, and the reply kept is the last call's, parsed
        again.  (With ``history=0`` the newest observation is sent elided, so its
        rebuilt copy is the elided note.)"""
        assert self.context is not None, "start() was not called"
        sent: list[dict[str, Any]] = []
        for step in steps:
            calls = step.action.llm_calls
            if not calls:
                raise ValueError(f"step {step.index} has no recorded model calls; the react "
                                 "agent cannot rebuild its conversation from it")
            first: list[dict[str, Any]] | None = None
            for call in calls:
                sent = [*sent[:int(call.get("prefix_messages") or 0)], *call.get("messages", [])]
                first = sent if first is None else first
                if call.get("tools_sha256") and self.tools:
                    self._last_tools_digest = _digest(self.tools)
            assert first is not None
            self.history.add(first[-1], observation=self._started)
            self._started = True
            last = calls[-1]
            response = ModelResponse(
                text=last.get("response") or "", stop_reason=last.get("stop_reason"),
                tool_calls=[ToolCall(id=c["id"], name=c["name"], arguments=dict(c["arguments"]))
                            for c in last.get("tool_calls") or []])
            self._note = None  # a note for the step after the last one stays set
            action, assistant = self._parse(response)
            self.history.add(assistant)
            self._pending_call_id = action.call_id
        self._last_sent = sent

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    # -- querying ------------------------------------------------------------------
    def _query(self) -> Action:
        assert self.context is not None and self.client is not None
        usage = Usage()
        calls: list[dict[str, Any]] = []
        extra: list[dict[str, Any]] = []
        status = _PendingStatus(self.context.status, usage)
        errors: list[str] = []
        for attempt in range(self.options.max_requeries + 1):
            messages = [{"role": "system", "content": self.system}, *self.history.messages(), *extra]
            started = time.monotonic()
            try:
                response = self.client.complete(messages, tools=self.tools,
                                                max_tokens=self.options.max_tokens,
                                                temperature=self.options.temperature,
                                                status=status)  # type: ignore[arg-type]
            except BudgetExceeded as exc:
                exc.usage = usage  # type: ignore[attr-defined]
                exc.llm_calls = calls  # type: ignore[attr-defined]
                raise
            latency = time.monotonic() - started
            usage.add(response.usage)
            record = self._record(messages, response, latency, attempt)
            calls.append(record)
            self._check_own_cost(usage, calls)
            try:
                action, assistant = self._parse(response)
            except CommandFormatError as exc:
                record["format_error"] = str(exc)
                errors.append(str(exc).splitlines()[0])
                extra = self._requery_messages(response, str(exc))
                continue
            action.usage = usage
            action.llm_calls = calls
            self.history.add(assistant)
            self._pending_call_id = action.call_id
            return action
        error = AgentFormatError(f"the model gave {len(errors)} replies that could not be run "
                                 f"(last: {errors[-1]})")
        error.usage = usage  # type: ignore[attr-defined]
        error.llm_calls = calls  # type: ignore[attr-defined]
        raise error

    def _check_own_cost(self, usage: Usage, calls: list[dict[str, Any]]) -> None:
        """End the episode (``BudgetExceeded("cost")``) once the agent's own cost limit
        is reached, counting this action's calls; checked after each call, as MLGym
        checks its per-instance limit."""
        limit = self.options.cost_limit
        assert self.context is not None
        spent = self.context.status.usage.cost_usd + usage.cost_usd
        if limit is None or spent < limit:
            return
        exc = BudgetExceeded("cost", f"the agent's cost limit: spent ${spent:.4f} of ${limit:g}")
        exc.usage = usage  # type: ignore[attr-defined]
        exc.llm_calls = calls  # type: ignore[attr-defined]
        raise exc

    def _parse(self, response: ModelResponse) -> tuple[Action, dict[str, Any]]:
        """The action and the assistant message to keep; raises CommandFormatError."""
        assert self.context is not None
        if self.options.mode == "tools" and response.tool_calls:
            call = response.tool_calls[0]
            names = {s.name for s in self.context.tools}
            if call.name not in names:
                raise CommandFormatError(f"there is no tool '{call.name}'; the tools are "
                                         f"{', '.join(sorted(names))}", "bad_arguments")
            if "_unparsed_arguments" in call.arguments:
                raise CommandFormatError(f"the arguments of '{call.name}' are not valid JSON: "
                                         f"{call.arguments['_unparsed_arguments'][:200]}", "bad_arguments")
            action = Action(tool=call.name, args=dict(call.arguments), thought=response.text or None,
                            raw=response.text, call_id=call.id)
            if len(response.tool_calls) > 1:
                self._note = (f"(Only the first of your {len(response.tool_calls)} tool calls was run; "
                              "call one tool per reply.)")
            assistant = {"role": "assistant", "content": response.text or None,
                         "tool_calls": [{"id": call.id, "type": "function",
                                         "function": {"name": call.name,
                                                      "arguments": json.dumps(call.arguments)}}]}
        else:
            # text mode, or a tools-mode reply that wrote a fenced command instead
            action = parse_action(response.text, self.context.tools)
            assistant = {"role": "assistant", "content": response.text}
        if action.tool == "bash":
            reason = blocked_reason(str(action.args.get("command", "")))
            if reason:
                raise CommandFormatError(reason, "blocked_command")
        return action, assistant

    def _requery_messages(self, response: ModelResponse, error: str) -> list[dict[str, Any]]:
        assistant: dict[str, Any] = {"role": "assistant", "content": response.text or None}
        if response.tool_calls:
            assistant["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name,
                                                     "arguments": json.dumps(c.arguments)}}
                                       for c in response.tool_calls]
            return [assistant, *({"role": "tool", "tool_call_id": c.id,
                                  "content": requery_text(error, self.options.mode)}
                                 for c in response.tool_calls)]
        if not response.text:
            assistant["content"] = "(empty reply)"
        return [assistant, {"role": "user", "content": requery_text(error, self.options.mode)}]

    def _record(self, messages: list[dict[str, Any]], response: ModelResponse, latency: float,
                attempt: int) -> dict[str, Any]:
        prefix = 0
        for old, new in zip(self._last_sent, messages, strict=False):
            if old != new:
                break
            prefix += 1
        record: dict[str, Any] = {
            "model": getattr(self.client, "model", self.config.model),
            "requery": attempt,
            "prefix_messages": prefix,
            "prefix_sha256": _digest(messages[:prefix]) if prefix else None,
            "messages": messages[prefix:],
            "n_messages": len(messages),
        }
        if self.tools:
            digest = _digest(self.tools)
            record["tools_sha256"] = digest
            if digest != self._last_tools_digest:
                record["tools"] = self.tools
                self._last_tools_digest = digest
        record.update({
            "response": response.text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in response.tool_calls],
            "stop_reason": response.stop_reason,
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "cost_usd": round(response.usage.cost_usd, 8),
            "latency_s": round(latency, 3),
        })
        if response.raw.get("_usage", {}).get("estimated"):
            record["tokens_estimated"] = True
        retries = response.raw.get("_retries")
        if isinstance(retries, list) and retries:  # failed attempts before this answer
            record["attempts"] = len(retries) + 1
            record["retries"] = retries
        self._last_sent = messages
        return record

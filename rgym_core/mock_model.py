"""The built-in mock model ``mock/...``: scripted or canned replies, no server, no key.

Like Inspect's ``mockllm``, it lets LLM agents (``react``) run whole episodes in
tests, demos and sweeps without an API key::

    rgym run rgym/demo --agent react --model mock/baseline
    rgym run rgym/demo --agent react --model mock/script \\
        --agent-option 'replies=["python baseline.py", "validate", "submit"]' \\
        --agent-option latency_s=0.5

Canned models (the part after ``mock/``):

``submit``
    submits at once.
``baseline``
    runs the baseline command the task message names (react's prompt says
    "The baseline is produced by: `CMD`"), validates, then submits.
``script``
    the ``replies`` option, in order (a list, or a YAML/JSON file holding one).

Options (``--agent-option KEY=VALUE`` of the react agent reach the client):
``replies`` (list or file), ``then`` (what follows the last reply: ``submit``,
the default, ``repeat`` or ``error``), ``latency_s`` and ``latency_jitter_s``
(seconds each reply takes: the episode waits as on a real server),
``input_price`` and ``output_price`` (USD per million tokens, default 0, so
cost limits work and the live table of a sweep shows a cost), ``seed`` (of the
jitter).

A reply is a string (a shell command or one of the task's tools, such as
``validate``: sent in a fenced block in text mode, as a native tool call in
tools mode), ``{"text": ...}`` (the reply text as is: to test parsers),
``{"command": ..., "thought": ...}`` or ``{"tool": NAME, "args": {...}}``.
Token counts are estimated from the text (4 characters a token), and the
pre-call cost check of :meth:`EpisodeStatus.check_cost` applies as for real
clients.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import define, field

from rgym_core.models import ModelProviderSpec, ModelResponse, ToolCall
from rgym_core.records import Usage

if TYPE_CHECKING:
    from rgym_core.agents import EpisodeStatus

#: The provider's registered name (``--model mock/NAME`` finds it by its short name).
PROVIDER = "rgym/mock"
#: The canned models and what they do.
CANNED = {
    "submit": "submits at once",
    "baseline": "runs the baseline command named in the task message, validates, submits",
    "script": "the replies of the 'replies' option, then 'then' (default: submit)",
}
_THEN = ("submit", "repeat", "error")
_BASELINE = re.compile(r"baseline is produced by: `([^`\n]+)`")


class MockModelError(ValueError):
    """A mock model was configured wrongly; the message says how to fix it."""


def _float(name: str, value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise MockModelError(f"mock model: option {name} must be a number, got {value!r}") from None
    if out < 0 or math.isnan(out):
        raise MockModelError(f"mock model: option {name} must be >= 0, got {value!r}")
    return out


def load_replies(value: Any) -> list[Any]:
    """The ``replies`` option: a list, a JSON/YAML text of one, or a file holding one."""
    if isinstance(value, (list, tuple)):
        replies = list(value)
    elif isinstance(value, str):
        text = value
        path = Path(value).expanduser()
        if "\n" not in value and len(value) < 4096 and path.suffix in (".json", ".yaml", ".yml"):
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise MockModelError(f"mock model: replies file {path}: {exc.strerror or exc}") from None
        try:
            import yaml

            data = yaml.safe_load(text)
        except Exception as exc:  # noqa: BLE001 - any parse error is reported the same way
            raise MockModelError(f"mock model: replies: not a YAML/JSON list ({exc})") from None
        if not isinstance(data, list):
            raise MockModelError(f"mock model: replies must be a list, got {type(data).__name__}")
        replies = data
    else:
        raise MockModelError(f"mock model: replies must be a list or a file, got {type(value).__name__}")
    for i, reply in enumerate(replies):
        ok = isinstance(reply, str) or (isinstance(reply, dict) and (
            isinstance(reply.get("text"), str) or isinstance(reply.get("command"), str)
            or isinstance(reply.get("tool"), str)))
        if not ok:
            raise MockModelError(f"mock model: replies[{i}]: expected a command string or a mapping "
                                 f"with 'text', 'command' or 'tool', got {reply!r}")
    return replies


@define
class MockOptions:
    """The mock model's options (see the module's documentation)."""

    replies: list[Any] = field(factory=list)
    then: str = "submit"
    latency_s: float = 0.0
    latency_jitter_s: float = 0.0
    input_price: float = 0.0
    output_price: float = 0.0
    seed: int | None = None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> MockOptions:
        # top_p: a generation setting a real client would send; the mock has nothing to sample.
        known = {"replies", "then", "latency_s", "latency_jitter_s", "input_price", "output_price",
                 "seed", "top_p"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise MockModelError(f"mock model: unknown option(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(known))}")
        then = str(options.get("then", "submit"))
        if then not in _THEN:
            raise MockModelError(f"mock model: then must be one of {', '.join(_THEN)}, got {then!r}")
        seed = options.get("seed")
        return cls(replies=load_replies(options["replies"]) if "replies" in options else [],
                   then=then, latency_s=_float("latency_s", options.get("latency_s", 0.0)),
                   latency_jitter_s=_float("latency_jitter_s", options.get("latency_jitter_s", 0.0)),
                   input_price=_float("input_price", options.get("input_price", 0.0)),
                   output_price=_float("output_price", options.get("output_price", 0.0)),
                   seed=None if seed in (None, "") else int(seed))


@define(frozen=True)
class MockPrice:
    """USD per million tokens (the shape of ``rgym_llm.prices.Price.cost``)."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int, **_: Any) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class MockModelClient:
    """A :class:`~rgym_core.models.ModelClient` that answers from a script."""

    provider = "mock"
    base_url = None

    def __init__(self, model: str, *, options: MockOptions | None = None) -> None:
        self.model = model
        self.options = options or MockOptions()
        if model not in CANNED:
            names = ", ".join(f"mock/{k}" for k in CANNED)
            raise MockModelError(f"unknown mock model 'mock/{model}'; the mock models are {names}")
        if model == "script" and not self.options.replies:
            raise MockModelError("mock/script needs replies: --agent-option 'replies=[\"ls\", "
                                 "\"submit\"]' (a JSON list) or replies=FILE.yaml")
        self.price = MockPrice(self.options.input_price, self.options.output_price)
        self.calls = 0
        self._lock = threading.Lock()
        self._plan: list[Any] | None = list(self.options.replies) if model == "script" else None
        self._random = random.Random(self.options.seed)

    # -- the ModelClient protocol --------------------------------------------------
    def check(self, requirements: Any) -> None:
        """Nothing to reach; a cost limit works (the price is known, 0 by default)."""
        return None

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 status: EpisodeStatus | None = None) -> ModelResponse:
        prompt_tokens = _tokens(json.dumps(messages, ensure_ascii=False))
        if status is not None:
            expected_out = max_tokens or 64
            status.check_cost(self.price.cost(prompt_tokens, expected_out), prompt_tokens + expected_out)
        with self._lock:
            index = self.calls
            self.calls += 1
            reply = self._reply(index, messages)
            delay = self.options.latency_s
            if self.options.latency_jitter_s:
                delay += self._random.uniform(0, self.options.latency_jitter_s)
        if delay:
            time.sleep(delay)
        response = self._response(reply, index, tools)
        out_tokens = _tokens(response.text) + 16 * len(response.tool_calls)
        response.usage = Usage(cost_usd=self.price.cost(prompt_tokens, out_tokens),
                               input_tokens=prompt_tokens, output_tokens=out_tokens, calls=1)
        response.raw = {"mock": True, "reply_index": index, "_usage": {"estimated": True}}
        return response

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"MockModelClient(model={self.model!r})"

    # -- replies ------------------------------------------------------------------
    def _reply(self, index: int, messages: list[dict[str, Any]]) -> Any:
        if self._plan is None:
            self._plan = self._canned(messages)
        if index < len(self._plan):
            return self._plan[index]
        if self.options.then == "repeat" and self._plan:
            return self._plan[index % len(self._plan)]
        if self.options.then == "error":
            raise MockModelError(f"mock/{self.model}: no reply left after {len(self._plan)} "
                                 "(then=error)")
        return "submit"

    def _canned(self, messages: Sequence[dict[str, Any]]) -> list[Any]:
        if self.model == "baseline":
            for message in messages:
                content = message.get("content")
                match = _BASELINE.search(content) if isinstance(content, str) else None
                if match:
                    return [match.group(1), "validate", "submit"]
            return ["submit"]
        return ["submit"]

    def _response(self, reply: Any, index: int, tools: list[dict[str, Any]] | None) -> ModelResponse:
        if isinstance(reply, dict) and "text" in reply:
            return ModelResponse(text=str(reply["text"]), stop_reason="stop")
        thought = f"Mock reply {index + 1}."
        if isinstance(reply, dict) and "tool" in reply:
            name, args = str(reply["tool"]), dict(reply.get("args") or {})
            command = " ".join([name, *(str(v) for v in args.values())])
            thought = str(reply.get("thought") or thought)
        else:
            command = str(reply["command"] if isinstance(reply, dict) else reply)
            if isinstance(reply, dict) and reply.get("thought"):
                thought = str(reply["thought"])
            name, args = _as_tool_call(command, tools)
        if tools:
            return ModelResponse(text=thought, stop_reason="tool_calls",
                                 tool_calls=[ToolCall(id=f"mock-{index + 1}", name=name,
                                                      arguments=args)])
        return ModelResponse(text=f"DISCUSSION\n{thought}\n```\n{command}\n```", stop_reason="stop")


def _as_tool_call(command: str, tools: list[dict[str, Any]] | None) -> tuple[str, dict[str, Any]]:
    """A command as a native tool call: a bare tool name (``validate``) calls that
    tool; anything else is a ``bash`` command."""
    names = set()
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and fn.get("name"):
            names.add(str(fn["name"]))
    word = command.strip()
    if word in names and word != "bash":
        return word, {}
    return "bash", {"command": command}


def create(model: str, base_url: str | None = None, **options: Any) -> MockModelClient:
    """The provider factory: ``mock/<model>`` with the options above (``base_url`` is ignored)."""
    return MockModelClient(model, options=MockOptions.from_options(options))


def provider_spec() -> ModelProviderSpec:
    """The ``rgym/mock`` provider, registered by rgym's built-in plugin."""
    return ModelProviderSpec(
        name=PROVIDER, factory=create,
        description="a mock model (no server, no key): mock/submit, mock/baseline, mock/script "
                    "(--agent-option replies=[...]); latency_s, input_price/output_price options")


__all__ = ["CANNED", "PROVIDER", "MockModelClient", "MockModelError", "MockOptions", "MockPrice",
           "create", "load_replies", "provider_spec"]

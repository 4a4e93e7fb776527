"""The Anthropic Messages API: ``POST {base_url}/v1/messages``.

Messages arrive in the OpenAI shape every rgym agent uses and are translated:
system messages become the ``system`` field, assistant ``tool_calls`` become
``tool_use`` blocks, ``tool`` messages become ``tool_result`` blocks in a user
turn, and consecutive turns of one role are merged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rgym_core import ModelResponse, ToolCall, Usage
from rgym_llm.client import ChatClient
from rgym_llm.errors import ModelResponseError, ModelServerError
from rgym_llm.sse import iter_sse

ANTHROPIC_VERSION = "2023-06-01"


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


def _blocks(content: Any) -> list[dict[str, Any]]:
    text = _text_of(content)
    return [{"type": "text", "text": text}] if text else []


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Translate OpenAI-shaped messages into Anthropic's ``system`` and ``messages``."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
        elif role == "user":
            add("user", _blocks(message.get("content")))
        elif role == "assistant":
            blocks = _blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                fn = call.get("function", {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args else {}
                    except ValueError:
                        args = {"_unparsed_arguments": args}
                blocks.append({"type": "tool_use", "id": call["id"], "name": fn.get("name", ""),
                               "input": args or {}})
            add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                          "content": _text_of(message.get("content")) or "(no output)"}])
        else:
            raise ValueError(f"message role {role!r} is not one of system, user, assistant, tool")
    return "\n\n".join(s for s in system if s), out


def to_anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """Accept a tool in OpenAI or Anthropic shape; return Anthropic's."""
    if "input_schema" in tool:
        return tool
    fn = tool.get("function", tool)
    return {"name": fn["name"], "description": fn.get("description", ""),
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}


def _usage(data: dict[str, Any], raw: dict[str, Any]) -> Usage:
    read = int(data.get("cache_read_input_tokens") or 0)
    write = int(data.get("cache_creation_input_tokens") or 0)
    if read or write:
        raw.setdefault("_usage", {}).update(cache_read=read, cache_write=write)
    return Usage(input_tokens=int(data.get("input_tokens") or 0) + read + write,
                 output_tokens=int(data.get("output_tokens") or 0))


class AnthropicClient(ChatClient):
    """A client for the Anthropic Messages API (key in ``ANTHROPIC_API_KEY``)."""

    key_envs = ("ANTHROPIC_API_KEY",)
    key_required = True
    default_base_url = "https://api.anthropic.com"

    def __init__(self, model: str, **kwargs: Any) -> None:
        base = kwargs.get("base_url")
        if base:  # accept the OpenAI habit of a trailing /v1
            base = base.rstrip("/")
            kwargs["base_url"] = base[:-3] if base.endswith("/v1") else base
        super().__init__(model, **kwargs)

    def _endpoint(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _models_url(self) -> str:
        return f"{self.base_url}/v1/models"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION, "Accept": "application/json"}
        if self._key:
            headers["x-api-key"] = self._key.reveal()
        return headers

    def _payload(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 max_tokens: int, temperature: float | None, stream: bool) -> dict[str, Any]:
        system, converted = to_anthropic_messages(messages)
        payload: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                   "messages": converted}
        if system:
            payload["system"] = system
        if temperature is not None:
            payload["temperature"] = temperature
        if self.options.top_p is not None:
            payload["top_p"] = self.options.top_p
        if tools:
            payload["tools"] = [to_anthropic_tool(t) for t in tools]
        if stream:
            payload["stream"] = True
        return payload

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("type") == "error":
            raise ModelServerError(f"{self.provider}: the server reported an error: "
                                   f"{str(data.get('error'))[:300]}", provider=self.provider,
                                   retryable=True)
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            if block["type"] == "text":
                text.append(block["text"])
            elif block["type"] == "tool_use":
                calls.append(ToolCall(id=block["id"], name=block["name"],
                                      arguments=dict(block.get("input") or {})))
        raw = {"id": data.get("id"), "model": data.get("model")}
        usage = _usage(data.get("usage") or {}, raw)
        return ModelResponse(text="".join(text), tool_calls=calls, usage=usage,
                             stop_reason=data.get("stop_reason"), raw=raw)

    def _parse_stream(self, lines: Iterable[str]) -> ModelResponse:
        blocks: dict[int, dict[str, Any]] = {}
        raw: dict[str, Any] = {"streamed": True}
        usage_data: dict[str, Any] = {}
        stop: str | None = None
        finished = False
        for event in iter_sse(lines):
            try:
                data = json.loads(event.data)
            except ValueError:
                raise ModelResponseError(f"{self.provider}: a stream event is not JSON: "
                                         f"{event.data[:200]!r}", provider=self.provider,
                                         retryable=True) from None
            kind = data.get("type", event.event)
            if kind == "error":
                raise ModelServerError(f"{self.provider}: error in stream: "
                                       f"{str(data.get('error'))[:300]}", provider=self.provider,
                                       retryable=True)
            if kind == "message_start":
                message = data.get("message", {})
                raw.update(id=message.get("id"), model=message.get("model"))
                usage_data.update(message.get("usage") or {})
            elif kind == "content_block_start":
                block = dict(data["content_block"])
                block["_json"] = ""
                blocks[int(data["index"])] = block
            elif kind == "content_block_delta":
                block = blocks[int(data["index"])]
                delta = data["delta"]
                if delta.get("type") == "text_delta":
                    block["text"] = block.get("text", "") + delta.get("text", "")
                elif delta.get("type") == "input_json_delta":
                    block["_json"] += delta.get("partial_json", "")
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason") or stop
                usage_data.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            elif kind == "message_stop":
                finished = True
        if not finished:
            raise ModelResponseError(f"{self.provider}: the stream ended before message_stop",
                                     provider=self.provider, retryable=True)
        text: list[str] = []
        calls: list[ToolCall] = []
        for _, block in sorted(blocks.items()):
            if block.get("type") == "text":
                text.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                try:
                    args = json.loads(block["_json"]) if block["_json"] else dict(block.get("input") or {})
                except ValueError:
                    args = {"_unparsed_arguments": block["_json"]}
                calls.append(ToolCall(id=block["id"], name=block["name"], arguments=args))
        return ModelResponse(text="".join(text), tool_calls=calls, usage=_usage(usage_data, raw),
                             stop_reason=stop, raw=raw)

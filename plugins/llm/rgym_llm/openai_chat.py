"""OpenAI chat completions: OpenAI itself and every server that speaks the same
API (vLLM, Ollama, OpenRouter, a LiteLLM proxy, llama.cpp, SGLang...).

``base_url`` is given as OpenAI's own clients take it, ending in ``/v1``; the
client POSTs to ``{base_url}/chat/completions``.  A bare ``http://host:port``
(no path at all) gets ``/v1`` appended, since every such server serves the API there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from rgym_core import ModelResponse, ToolCall, Usage
from rgym_llm.client import ChatClient
from rgym_llm.errors import ModelResponseError, ModelServerError
from rgym_llm.sse import iter_sse


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_unparsed_arguments": str(raw)}
    return value if isinstance(value, dict) else {"_unparsed_arguments": str(raw)}


def _usage(data: dict[str, Any] | None, raw: dict[str, Any]) -> Usage:
    if not data:
        return Usage()
    details = data.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    if cached:
        raw.setdefault("_usage", {})["cache_read"] = cached
    return Usage(input_tokens=int(data.get("prompt_tokens") or 0),
                 output_tokens=int(data.get("completion_tokens") or 0))


class OpenAIChatClient(ChatClient):
    """A client for ``POST {base_url}/chat/completions``."""

    key_envs = ("OPENAI_API_KEY",)
    #: OpenAI's own API takes ``max_completion_tokens``; compatible servers ``max_tokens``.
    max_tokens_field = "max_tokens"

    def __init__(self, model: str, **kwargs: Any) -> None:
        base = kwargs.get("base_url")
        if base and urlsplit(base).path in ("", "/"):
            kwargs["base_url"] = base.rstrip("/") + "/v1"
        super().__init__(model, **kwargs)

    def _endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def _payload(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 max_tokens: int, temperature: float | None, stream: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": messages,
                                   self.max_tokens_field: max_tokens}
        if temperature is not None:
            payload["temperature"] = temperature
        if self.options.top_p is not None:
            payload["top_p"] = self.options.top_p
        if tools:
            payload["tools"] = [_openai_tool(t) for t in tools]
        if stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        if "error" in data and "choices" not in data:
            raise ModelServerError(f"{self.provider}: the server reported an error: "
                                   f"{str(data['error'])[:300]}", provider=self.provider, retryable=True)
        choice = data["choices"][0]
        message = choice["message"]
        calls = [ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"],
                          arguments=_arguments(c["function"].get("arguments")))
                 for i, c in enumerate(message.get("tool_calls") or [])]
        raw = {"id": data.get("id"), "model": data.get("model")}
        usage = _usage(data.get("usage"), raw)
        return ModelResponse(text=message.get("content") or "", tool_calls=calls, usage=usage,
                             stop_reason=choice.get("finish_reason"), raw=raw)

    def _parse_stream(self, lines: Iterable[str]) -> ModelResponse:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        raw: dict[str, Any] = {"streamed": True}
        usage = Usage()
        done = False
        for event in iter_sse(lines):
            if event.data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(event.data)
            except ValueError:
                raise ModelResponseError(f"{self.provider}: a stream chunk is not JSON: "
                                         f"{event.data[:200]!r}", provider=self.provider,
                                         retryable=True) from None
            if "error" in chunk:
                raise ModelServerError(f"{self.provider}: error in stream: {str(chunk['error'])[:300]}",
                                       provider=self.provider, retryable=True)
            raw.setdefault("id", chunk.get("id"))
            raw.setdefault("model", chunk.get("model"))
            if chunk.get("usage"):
                usage = _usage(chunk["usage"], raw)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for part in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(part.get("index", 0)), {"id": None, "name": "", "args": ""})
                    if part.get("id"):
                        slot["id"] = part["id"]
                    fn = part.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    slot["args"] += fn.get("arguments") or ""
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not done and finish is None:
            raise ModelResponseError(f"{self.provider}: the stream ended before its last chunk",
                                     provider=self.provider, retryable=True)
        tool_calls = [ToolCall(id=slot["id"] or f"call_{i}", name=slot["name"],
                               arguments=_arguments(slot["args"]))
                      for i, slot in sorted(calls.items())]
        return ModelResponse(text="".join(text), tool_calls=tool_calls, usage=usage,
                             stop_reason=finish, raw=raw)


class OpenAIClient(OpenAIChatClient):
    """OpenAI's own API: a key is required and ``max_completion_tokens`` is sent."""

    key_required = True
    default_base_url = "https://api.openai.com/v1"
    max_tokens_field = "max_completion_tokens"


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """Accept a tool in OpenAI shape or Anthropic shape; return OpenAI's."""
    if "input_schema" in tool:
        return {"type": "function", "function": {"name": tool["name"],
                                                 "description": tool.get("description", ""),
                                                 "parameters": tool["input_schema"]}}
    return tool

"""A fake LLM provider for tests: a real HTTP server on 127.0.0.1, in a thread,
speaking OpenAI chat completions (``POST /v1/chat/completions``) and the
Anthropic Messages API (``POST /v1/messages``), streamed (SSE) or not, driven
by a script of :class:`Reply` objects::

    from rgym_llm.testing import FakeLLMServer, Reply

    with FakeLLMServer([Reply(status=429, headers={"Retry-After": "1"}),
                        Reply(text="DISCUSSION\\nlook\\n```\\nls\\n```")]) as server:
        client = create_model_client("openai-compatible/test", base_url=server.base_url)
        ...
        assert len(server.requests) == 2

Each request takes the next reply (or the result of calling it, when the
script holds a function of the :class:`RecordedRequest`).  A reply is rendered
in the wire format of the endpoint that was hit, and streamed when the request
asked for ``stream``.  Token usage is the given counts or, by default, the
request's JSON length / 4 and the answer's length / 4.  When the script runs
out the server answers 400 ``fake server: script exhausted`` (never retried).

``python -m rgym_llm.testing SCRIPT.json [--port N]`` serves a JSON list of
reply objects (the fields of :class:`Reply`) and prints the base URL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from attrs import define, field

from rgym_core.testing.http import LoopbackServer, RecordedRequest
from rgym_core.testing.http import Reply as HttpReply
from rgym_core.testing.http import sse as _sse

__all__ = ["FakeLLMServer", "RecordedRequest", "Reply", "api_of", "main"]


@define
class Reply:
    """One scripted answer.

    ``tool_calls`` entries are ``{"name": ..., "arguments": {...}}`` (``id``
    optional).  ``status`` >= 400 sends an error body in the endpoint's format
    carrying ``error`` (or ``body`` when given).  ``body`` (str, bytes or a dict
    sent as JSON) replaces the whole rendered body, for malformed answers.
    ``delay_s`` waits before answering (to trip a client's read timeout).
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    status: int = 200
    headers: dict[str, str] = field(factory=dict)
    body: str | bytes | dict[str, Any] | None = None
    error: str = "scripted error"
    delay_s: float = 0.0
    stop_reason: str | None = None
    cut_stream: bool = False

    @classmethod
    def tool(cls, name: str, arguments: dict[str, Any] | None = None, text: str = "",
             **kwargs: Any) -> Reply:
        """A reply that calls one tool natively."""
        return cls(text=text, tool_calls=[{"name": name, "arguments": arguments or {}}], **kwargs)


def api_of(request: RecordedRequest) -> str:
    """``anthropic`` for the Messages endpoint, else ``openai``."""
    return "anthropic" if request.path.rstrip("/").endswith("/messages") else "openai"


ScriptItem = Reply | Callable[[RecordedRequest], Reply]


def _approx_tokens(value: Any) -> int:
    return max(1, math.ceil(len(json.dumps(value, ensure_ascii=False)) / 4))


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or []


class FakeLLMServer:
    """The fake provider on :class:`rgym_core.testing.LoopbackServer`; use as a
    context manager or call ``start``/``stop``."""

    def __init__(self, script: Iterable[ScriptItem] = (), *, host: str = "127.0.0.1",
                 port: int = 0, models: Iterable[str] = ()) -> None:
        self.script: list[ScriptItem] = list(script)
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.http = LoopbackServer(host=host, port=port, protocol="HTTP/1.0", fallback=self._serve)
        # The model list ``GET /v1/models`` answers: empty (any name goes) unless ``models``.
        self.http.handle("/v1/models", HttpReply(200, {"object": "list", "data": [
            {"id": name, "object": "model"} for name in models]}))

    # -- lifecycle ----------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """The completion requests received (not the ``/v1/models`` probes)."""
        return [r for r in self.http.requests if r.method == "POST"]

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return self.url + "/v1"

    def start(self) -> FakeLLMServer:
        self.http.start()
        return self

    def stop(self) -> None:
        self.http.stop()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script."""
        with self._lock:
            self.script.extend(items)

    @property
    def remaining(self) -> int:
        return len(self.script)

    # -- request handling ---------------------------------------------------------
    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            item = self.script.pop(0) if self.script else None
        if item is None:
            self.errors.append(f"script exhausted at request {len(self.requests)}")
            return Reply(status=400, error="fake server: script exhausted")
        return item(request) if callable(item) else item

    def _serve(self, request: RecordedRequest) -> HttpReply:
        if request.method != "POST" or not request.path.rstrip("/").endswith(("/chat/completions",
                                                                                "/messages")):
            self.errors.append(f"unexpected {request.method} {request.path}")
            return HttpReply(404, {"error": {"message": f"no route {request.path}"}})
        reply = self._next(request)
        rendered = self._render(request, reply)
        rendered.delay_s = reply.delay_s
        return rendered

    def _render(self, request: RecordedRequest, reply: Reply) -> HttpReply:
        api = api_of(request)
        headers = dict(reply.headers)
        if reply.body is not None:
            body = reply.body
            data = json.dumps(body).encode() if isinstance(body, dict) else (
                body if isinstance(body, bytes) else body.encode())
            return HttpReply(reply.status, data, headers=headers, content_type="application/json")
        if reply.status >= 400:
            if api == "anthropic":
                kind = {401: "authentication_error", 429: "rate_limit_error",
                        529: "overloaded_error"}.get(reply.status, "api_error")
                err: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": reply.error}}
            else:
                err = {"error": {"message": reply.error, "type": "fake_error", "code": reply.status}}
            return HttpReply(reply.status, err, headers=headers)
        n = next(self._ids)
        calls = [{"id": c.get("id") or (f"toolu_{n}_{i}" if api == "anthropic" else f"call_{n}_{i}"),
                  "name": c["name"], "arguments": c.get("arguments") or {}}
                 for i, c in enumerate(reply.tool_calls)]
        req = request.json if isinstance(request.json, dict) else {}
        prompt_part = {k: req.get(k) for k in ("system", "messages", "tools") if k in req}
        input_tokens = reply.input_tokens if reply.input_tokens is not None else _approx_tokens(prompt_part)
        output_tokens = (reply.output_tokens if reply.output_tokens is not None
                         else max(1, math.ceil(len(reply.text) / 4)) + sum(_approx_tokens(c) for c in calls))
        model = req.get("model", "fake")
        if req.get("stream"):
            chunks = (self._anthropic_stream if api == "anthropic" else self._openai_stream)(
                n, model, reply, calls, input_tokens, output_tokens, req)
            if reply.cut_stream:
                chunks = chunks[: max(1, len(chunks) // 2)]
            return HttpReply(reply.status, headers=headers, content_type="text/event-stream", chunks=chunks)
        render = self._anthropic_body if api == "anthropic" else self._openai_body
        return HttpReply(reply.status, render(n, model, reply, calls, input_tokens, output_tokens),
                         headers=headers)

    # -- OpenAI wire format -------------------------------------------------------
    @staticmethod
    def _openai_body(n: int, model: str, reply: Reply, calls: list[dict[str, Any]],
                     input_tokens: int, output_tokens: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"],
                                                   "arguments": json.dumps(c["arguments"])}}
                                     for c in calls]
        finish = reply.stop_reason or ("tool_calls" if calls else "stop")
        return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                          "total_tokens": input_tokens + output_tokens}}

    @staticmethod
    def _openai_stream(n: int, model: str, reply: Reply, calls: list[dict[str, Any]],
                       input_tokens: int, output_tokens: int, req: dict[str, Any]) -> list[bytes]:
        base = {"id": f"chatcmpl-fake-{n}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in _pieces(reply.text)]
        for i, c in enumerate(calls):
            args = json.dumps(c["arguments"])
            half = len(args) // 2
            out.append(chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                              "function": {"name": c["name"], "arguments": args[:half]}}]}))
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]}))
        out.append(chunk({}, reply.stop_reason or ("tool_calls" if calls else "stop")))
        if (req.get("stream_options") or {}).get("include_usage"):
            out.append(_sse({**base, "choices": [], "usage": {
                "prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens}}))
        out.append(b"data: [DONE]\n\n")
        return out

    # -- Anthropic wire format ----------------------------------------------------
    @staticmethod
    def _anthropic_body(n: int, model: str, reply: Reply, calls: list[dict[str, Any]],
                        input_tokens: int, output_tokens: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                    for c in calls]
        return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
                "content": content,
                "stop_reason": reply.stop_reason or ("tool_use" if calls else "end_turn"),
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}

    @staticmethod
    def _anthropic_stream(n: int, model: str, reply: Reply, calls: list[dict[str, Any]],
                          input_tokens: int, output_tokens: int, req: dict[str, Any]) -> list[bytes]:
        out = [_sse({"type": "message_start", "message": {
            "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}, "message_start"),
            _sse({"type": "ping"}, "ping")]
        index = 0
        if reply.text:
            out.append(_sse({"type": "content_block_start", "index": index,
                             "content_block": {"type": "text", "text": ""}}, "content_block_start"))
            out += [_sse({"type": "content_block_delta", "index": index,
                          "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
                    for piece in _pieces(reply.text)]
            out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        for c in calls:
            args = json.dumps(c["arguments"])
            half = len(args) // 2
            out.append(_sse({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}},
                "content_block_start"))
            for part in (args[:half], args[half:]):
                out.append(_sse({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "input_json_delta", "partial_json": part}},
                                "content_block_delta"))
            out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        out.append(_sse({"type": "message_delta", "delta": {
            "stop_reason": reply.stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None}, "usage": {"output_tokens": output_tokens}}, "message_delta"))
        out.append(_sse({"type": "message_stop"}, "message_stop"))
        return out


def main(argv: list[str] | None = None) -> None:
    """Serve a JSON script until interrupted (for manual tries and other processes)."""
    parser = argparse.ArgumentParser(prog="python -m rgym_llm.testing", description=main.__doc__)
    parser.add_argument("script", help="JSON file: a list of reply objects (fields of Reply)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = [Reply(**item) for item in json.load(fh)]
    server = FakeLLMServer(items, port=args.port).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()

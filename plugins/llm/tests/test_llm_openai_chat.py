"""The OpenAI-compatible client against the loopback server: wire format, retries, errors."""

from __future__ import annotations

import socket

import pytest
from llm_test_support import KEY
from rgym_llm.errors import (
    ModelAuthError,
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)
from rgym_llm.testing import Reply

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "open", "description": "open a file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]


@pytest.mark.parametrize("stream", [False, True])
def test_text_and_usage_and_cost(server, make_client, stream):
    server.add(Reply(text="hello there, a longer answer to split", input_tokens=1000,
                     output_tokens=500))
    client = make_client(stream=stream)
    response = client.complete(MESSAGES, max_tokens=64)
    assert response.text == "hello there, a longer answer to split"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1000, 500)
    assert response.usage.cost_usd == pytest.approx(1000 * 2e-6 + 500 * 10e-6)
    assert response.usage.calls == 1
    assert response.stop_reason == "stop"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json["model"] == "test-model"
    assert request.json["messages"] == MESSAGES
    assert request.json["max_tokens"] == 64
    assert request.json.get("stream", False) is stream
    if stream:
        assert request.json["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True])
def test_native_tool_calls(server, make_client, stream):
    server.add(Reply.tool("open", {"path": "train.py"}, text="let me look"))
    response = make_client(stream=stream).complete(MESSAGES, tools=TOOLS)
    assert response.text == "let me look"
    [call] = response.tool_calls
    assert (call.name, call.arguments) == ("open", {"path": "train.py"})
    assert call.id
    assert response.stop_reason == "tool_calls"
    assert server.requests[0].json["tools"] == TOOLS


def test_anthropic_shaped_tools_are_converted(server, make_client):
    server.add(Reply(text="ok"))
    make_client().complete(MESSAGES, tools=[{"name": "open", "description": "d",
                                             "input_schema": {"type": "object"}}])
    assert server.requests[0].json["tools"] == [
        {"type": "function", "function": {"name": "open", "description": "d",
                                          "parameters": {"type": "object"}}}]


def test_429_honours_retry_after(server, make_client, sleeps):
    server.add(Reply(status=429, headers={"Retry-After": "1.5"}), Reply(text="ok"))
    assert make_client().complete(MESSAGES).text == "ok"
    assert len(server.requests) == 2
    assert sleeps == [1.5]


def test_retry_after_ms_header(server, make_client, sleeps):
    server.add(Reply(status=429, headers={"retry-after-ms": "250"}), Reply(text="ok"))
    make_client().complete(MESSAGES)
    assert sleeps == [0.25]


def test_retry_after_beyond_the_wait_budget_gives_up_at_once(server, make_client, sleeps):
    server.add(Reply(status=429, headers={"Retry-After": "600"}), Reply(text="never sent"))
    with pytest.raises(ModelRateLimitError) as info:
        make_client(max_wait_s=30).complete(MESSAGES)
    assert len(server.requests) == 1 and sleeps == []
    assert "asked to wait 600 s" in str(info.value) and "max_wait_s=30" in str(info.value)


def test_500_then_success_uses_jittered_backoff(server, make_client, sleeps):
    server.add(Reply(status=500), Reply(status=503), Reply(text="ok"))
    assert make_client().complete(MESSAGES).text == "ok"
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and all(0 <= s <= 0.05 for s in sleeps)


def test_persistent_5xx_gives_up_after_max_attempts(server, make_client):
    server.add(*[Reply(status=502, error="bad gateway")] * 5)
    with pytest.raises(ModelServerError) as info:
        make_client(max_attempts=3).complete(MESSAGES)
    assert len(server.requests) == 3
    message = str(info.value)
    assert "HTTP 502" in message and "bad gateway" in message and "gave up after 3 attempts" in message


def test_malformed_json_is_retried_once(server, make_client):
    server.add(Reply(body="{not json"), Reply(text="ok"))
    assert make_client().complete(MESSAGES).text == "ok"
    assert len(server.requests) == 2


def test_malformed_json_twice_is_a_clear_error(server, make_client):
    server.add(Reply(body="<html>proxy error</html>"), Reply(body="{\"choices\": 3}"), Reply(text="x"))
    with pytest.raises(ModelResponseError) as info:
        make_client().complete(MESSAGES)
    assert len(server.requests) == 2
    assert "unexpected shape" in str(info.value) or "not JSON" in str(info.value)


def test_cut_stream_is_retried(server, make_client):
    server.add(Reply(text="a fairly long answer that gets cut", cut_stream=True), Reply(text="whole"))
    assert make_client(stream=True).complete(MESSAGES).text == "whole"
    assert len(server.requests) == 2


def test_read_timeout_is_retried(server, make_client):
    server.add(Reply(text="late", delay_s=3), Reply(text="on time"))
    assert make_client(read_timeout=0.3).complete(MESSAGES).text == "on time"
    assert len(server.requests) == 2


def test_read_timeout_gives_up(server, make_client):
    server.add(Reply(delay_s=3), Reply(delay_s=3))
    with pytest.raises(ModelTimeoutError) as info:
        make_client(read_timeout=0.2, max_attempts=2).complete(MESSAGES)
    assert "read 0.2 s" in str(info.value) and "gave up after 2 attempts" in str(info.value)


def test_401_is_not_retried_and_names_the_fix(server, make_client):
    server.add(Reply(status=401, error=f"Incorrect API key provided: {KEY}"), Reply(text="x"))
    client = make_client()
    with pytest.raises(ModelAuthError) as info:
        client.complete(MESSAGES)
    assert len(server.requests) == 1
    message = str(info.value)
    assert "HTTP 401" in message and "OPENAI_API_KEY" in message and "openai-test" in message
    assert KEY not in message and KEY not in repr(info.value) and KEY not in repr(client)
    assert "\n" not in message


@pytest.mark.parametrize("status,cls", [(400, ModelRequestError), (403, ModelAuthError),
                                        (404, ModelRequestError)])
def test_client_errors_are_not_retried(server, make_client, status, cls):
    server.add(Reply(status=status, error="nope"), Reply(text="x"))
    with pytest.raises(cls) as info:
        make_client().complete(MESSAGES)
    assert len(server.requests) == 1
    assert f"HTTP {status}" in str(info.value)
    if status == 404:
        assert "/v1" in str(info.value)


def test_connection_refused_is_retried_then_clear(make_client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from rgym_llm.client import ClientOptions
    from rgym_llm.openai_chat import OpenAIChatClient

    client = OpenAIChatClient("m", provider="openai-compatible", base_url=f"http://127.0.0.1:{port}/v1",
                              options=ClientOptions(max_attempts=2, backoff_initial_s=0.01),
                              sleep=lambda s: None)
    with pytest.raises(ModelConnectionError) as info:
        client.complete(MESSAGES)
    assert "is the server running?" in str(info.value) and "gave up after 2 attempts" in str(info.value)


def test_bare_host_and_port_gets_v1(server, sleeps):
    from rgym_llm.openai_chat import OpenAIChatClient

    server.add(Reply(text="ok"))
    client = OpenAIChatClient("test-model", provider="openai-compatible", base_url=server.url,
                              sleep=sleeps.append)
    assert client.base_url == server.base_url
    client.complete(MESSAGES)
    assert server.requests[0].path == "/v1/chat/completions"

"""The Anthropic Messages client: translation, wire format, streaming, errors."""

from __future__ import annotations

import pytest
from llm_test_support import KEY
from rgym_llm.anthropic_messages import ANTHROPIC_VERSION, to_anthropic_messages
from rgym_llm.errors import ModelAuthError, ModelConfigError
from rgym_llm.testing import Reply

CONVERSATION = [
    {"role": "system", "content": "You are a researcher."},
    {"role": "user", "content": "Task: improve the model."},
    {"role": "assistant", "content": "I'll open the file.",
     "tool_calls": [{"id": "toolu_1", "type": "function",
                     "function": {"name": "open", "arguments": "{\"path\": \"train.py\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "[File: train.py (3 lines)]"},
    {"role": "user", "content": "(step 2 of 50)"},
]


def test_translation_separates_system_and_maps_tool_blocks():
    system, messages = to_anthropic_messages(CONVERSATION)
    assert system == "You are a researcher."
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "I'll open the file."},
        {"type": "tool_use", "id": "toolu_1", "name": "open", "input": {"path": "train.py"}}]
    # the tool result and the next user text merge into one user turn, result first
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[File: train.py (3 lines)]"},
        {"type": "text", "text": "(step 2 of 50)"}]


@pytest.mark.parametrize("stream", [False, True])
def test_wire_format_text_and_tool_use(server, make_client, stream):
    server.add(Reply.tool("open", {"path": "a.py", "line_number": 3}, text="Looking.",
                          input_tokens=2000, output_tokens=100))
    client = make_client("anthropic", model="claude-test", stream=stream)
    tools = [{"type": "function", "function": {"name": "open", "description": "open a file",
                                               "parameters": {"type": "object"}}}]
    response = client.complete(CONVERSATION, tools=tools, max_tokens=256, temperature=0)
    assert response.text == "Looking."
    [call] = response.tool_calls
    assert (call.name, call.arguments) == ("open", {"path": "a.py", "line_number": 3})
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (2000, 100)
    assert response.usage.cost_usd == pytest.approx(2000 * 3e-6 + 100 * 15e-6)
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
    body = request.json
    assert body["system"] == "You are a researcher."
    assert body["max_tokens"] == 256 and body["temperature"] == 0
    assert body["tools"] == [{"name": "open", "description": "open a file",
                              "input_schema": {"type": "object"}}]
    assert body.get("stream", False) is stream


def test_base_url_with_v1_is_accepted(server, sleeps):
    from rgym_llm.anthropic_messages import AnthropicClient
    from rgym_llm.keys import Secret

    server.add(Reply(text="ok"))
    client = AnthropicClient("claude-test", provider="anthropic", base_url=server.base_url,
                             api_key=Secret(KEY), sleep=sleeps.append)
    assert client.complete([{"role": "user", "content": "hi"}]).text == "ok"
    assert server.requests[0].path == "/v1/messages"


def test_overloaded_529_is_retried(server, make_client, sleeps):
    server.add(Reply(status=529, error="Overloaded"), Reply(text="ok"))
    assert make_client("anthropic", model="claude-test").complete(CONVERSATION).text == "ok"
    assert len(server.requests) == 2 and len(sleeps) == 1


def test_auth_error_is_clear(server, make_client):
    server.add(Reply(status=401, error="invalid x-api-key"))
    with pytest.raises(ModelAuthError) as info:
        make_client("anthropic", model="claude-test").complete(CONVERSATION)
    assert "ANTHROPIC_API_KEY" in str(info.value) and len(server.requests) == 1


def test_missing_key_fails_before_any_request(monkeypatch, tmp_path):
    from rgym_core import create_model_client

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        create_model_client("anthropic/claude-sonnet-4-5")

"""Keys (environment, .env, redaction), options and registration."""

from __future__ import annotations

import pytest
from rgym_llm.client import parse_retry_after
from rgym_llm.errors import ModelConfigError
from rgym_llm.keys import Secret, find_key, parse_dotenv, redact
from rgym_llm.testing import Reply

from rgym_core import create_model_client
from rgym_core.registry import load_registry


def test_parse_dotenv():
    text = ("# keys\nexport OPENAI_API_KEY='sk-a'\nANTHROPIC_API_KEY=\"sk-b\"\n"
            "PLAIN=value # comment\nBROKEN LINE\n\nEMPTY=\n")
    assert parse_dotenv(text) == {"OPENAI_API_KEY": "sk-a", "ANTHROPIC_API_KEY": "sk-b",
                                  "PLAIN": "value", "EMPTY": ""}


def test_environment_wins_over_dotenv(tmp_path):
    (tmp_path / ".env").write_text("A_KEY=from-file\nB_KEY=file-b\n")
    key, source = find_key(["A_KEY"], environ={"A_KEY": "from-env"}, dotenv=tmp_path / ".env")
    assert key.reveal() == "from-env" and source == "$A_KEY"
    key, source = find_key(["A_KEY", "B_KEY"], environ={}, dotenv=tmp_path / ".env")
    assert key.reveal() == "from-file" and source == ".env:A_KEY"
    assert find_key(["C_KEY"], environ={}, dotenv=tmp_path / ".env") == (None, None)


def test_secret_never_prints():
    secret = Secret("sk-very-secret")
    assert "sk-very" not in repr(secret) and "sk-very" not in str(secret) and "sk-very" not in f"{secret}"
    assert redact("key sk-very-secret here", secret) == "key *** here"


def test_dotenv_key_reaches_the_server_and_not_repr(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("MY_GATEWAY_KEY=sk-from-dotenv-777\n")
    server.add(Reply(text="ok"))
    client = create_model_client("openai-compatible/some-model", base_url=server.base_url,
                                 api_key_env="MY_GATEWAY_KEY")
    assert "sk-from-dotenv" not in repr(client)
    client.complete([{"role": "user", "content": "hi"}])
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-dotenv-777"


def test_no_key_sends_no_authorization(server, tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    server.add(Reply(text="ok"))
    create_model_client("openai-compatible/m", base_url=server.base_url).complete(
        [{"role": "user", "content": "hi"}])
    assert "authorization" not in server.requests[0].headers


def test_all_providers_registered():
    names = set(load_registry().model_providers)
    assert {"llm/openai-compatible", "llm/openai", "llm/anthropic", "llm/vllm", "llm/ollama",
            "llm/openrouter", "llm/litellm"} <= names


def test_options_arrive_as_strings_and_unknown_ones_are_named(server):
    client = create_model_client("vllm/qwen", base_url=server.base_url, stream="true",
                                 max_tokens="128", read_timeout="7")
    assert client.options.stream is True and client.options.max_tokens == 128
    assert client.options.read_timeout == 7.0
    with pytest.raises(ModelConfigError, match="unknown option.*strem"):
        create_model_client("vllm/qwen", strem="true")
    with pytest.raises(ModelConfigError, match="bad option value"):
        create_model_client("vllm/qwen", stream="maybe")


def test_openai_requires_a_key_and_uses_max_completion_tokens(server, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        create_model_client("openai/gpt-4o")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x-123456")
    server.add(Reply(text="ok"))
    create_model_client("openai/gpt-4o", base_url=server.base_url).complete(
        [{"role": "user", "content": "hi"}], max_tokens=5)
    assert server.requests[0].json["max_completion_tokens"] == 5


def test_retry_after_http_date():
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"},
                             now=1445412500.0) == pytest.approx(10.0)
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None

"""Pre-flight checks of a model client (``check(requirements)``, called by the
runner before an episode starts): a price for a cost limit, a server that
answers, a key it accepts.  Real HTTP over loopback."""

from __future__ import annotations

import socket

import pytest
from rgym_llm.testing import FakeLLMServer

from rgym_core.models import ModelCheckError, ModelRequirements
from rgym_core.testing import Reply as HttpReply


def test_a_reachable_server_that_accepts_the_key_passes(server: FakeLLMServer, make_client) -> None:  # type: ignore[no-untyped-def]
    for kind in ("openai", "anthropic"):
        make_client(kind).check(ModelRequirements(cost_limit_usd=1.0))
    paths = [r.path for r in server.http.requests]
    assert paths == ["/v1/models", "/v1/models"]
    assert server.requests == []  # no completion was paid for


def test_cost_limit_on_an_unpriced_model_names_the_fix(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client("openai", model="not-in-any-price-table")
    with pytest.raises(ModelCheckError, match="no price known for model 'not-in-any-price-table'"
                                              ".*--price not-in-any-price-table=IN,OUT.*RGYM_PRICES"):
        client.check(ModelRequirements(cost_limit_usd=2.0, probe=False))
    client.check(ModelRequirements(cost_limit_usd=None, probe=False))  # no limit: fine


def test_a_refused_key_names_the_variable(server: FakeLLMServer, make_client) -> None:  # type: ignore[no-untyped-def]
    server.http.queue("/v1/models", HttpReply(401, {"error": {"message": "invalid api key"}}))
    with pytest.raises(ModelCheckError, match=r"refused the API key \(HTTP 401: invalid api key\)"):
        make_client("openai").check(ModelRequirements())


def test_an_unreachable_server_says_so() -> None:
    from llm_test_support import PRICES
    from rgym_llm.client import ClientOptions
    from rgym_llm.openai_chat import OpenAIChatClient

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIChatClient("test-model", provider="openai-test", base_url=f"http://127.0.0.1:{port}/v1",
                              options=ClientOptions(connect_timeout=2.0), prices=PRICES)
    try:
        with pytest.raises(ModelCheckError, match="cannot reach the model server.*fix --base-url"):
            client.check(ModelRequirements(timeout_s=2.0))
    finally:
        client.close()


def test_a_model_the_server_does_not_list_is_refused_with_the_names_it_lists() -> None:
    from llm_test_support import KEY, PRICES
    from rgym_llm.client import ClientOptions
    from rgym_llm.keys import Secret
    from rgym_llm.openai_chat import OpenAIChatClient

    with FakeLLMServer(models=["Qwen/Qwen2.5-7B-Instruct", "llama3.1:8b", "gpt-4o"]) as srv:
        def client(model: str) -> OpenAIChatClient:
            return OpenAIChatClient(model, provider="openai-test", base_url=srv.base_url,
                                    options=ClientOptions(connect_timeout=2.0), api_key=Secret(KEY),
                                    prices=PRICES)
        with pytest.raises(ModelCheckError, match=r"does not serve model 'Qwen/Qwen2.5-7B-Instruc' "
                                                  r"\(did you mean Qwen/Qwen2.5-7B-Instruct\)"):
            client("Qwen/Qwen2.5-7B-Instruc").check(ModelRequirements())
        with pytest.raises(ModelCheckError, match=r"it lists Qwen/Qwen2.5-7B-Instruct, gpt-4o, llama3.1:8b"):
            client("totally-else").check(ModelRequirements())
        for ok in ("gpt-4o", "GPT-4o", "qwen/qwen2.5-7b-instruct", "Qwen2.5-7B-Instruct", "llama3.1:8b"):
            client(ok).check(ModelRequirements())  # listed (case, vendor prefix aside)
        assert srv.requests == []  # nothing was paid for


def test_rgym_run_refuses_an_unlisted_model_before_the_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rgym_core.testing import run_cli

    with FakeLLMServer(models=["qwen2.5-7b"]) as srv:
        proc = run_cli("run", "rgym/demo", "--agent", "react", "--model", "openai-compatible/qwen2.5-7",
                       "--base-url", srv.base_url, "--runs-dir", str(tmp_path / "runs"),
                       env={"OPENAI_API_KEY": "sk-test"}, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "did you mean qwen2.5-7b" in errors[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("result.json"))

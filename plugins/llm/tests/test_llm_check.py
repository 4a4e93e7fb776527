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
    with pytest.raises(ModelCheckError, match="no price for this model.*RGYM_PRICES"):
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

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llm_test_support import KEY, PRICES
from rgym_llm.client import ClientOptions
from rgym_llm.testing import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_client(server: FakeLLMServer, sleeps: list[float]):  # type: ignore[no-untyped-def]
    """Build a client for the fake server with fast backoff and a recorded sleep."""
    from rgym_llm.anthropic_messages import AnthropicClient
    from rgym_llm.keys import Secret
    from rgym_llm.openai_chat import OpenAIChatClient

    clients = []

    def build(kind: str = "openai", model: str = "test-model", **options: Any):  # type: ignore[no-untyped-def]
        opts = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "read_timeout": 5.0,
                "connect_timeout": 2.0, **options}
        cls = AnthropicClient if kind == "anthropic" else OpenAIChatClient
        base = server.url if kind == "anthropic" else server.base_url
        client = cls(model, provider=f"{kind}-test", base_url=base, options=ClientOptions(**opts),
                     api_key=Secret(KEY), prices=PRICES, sleep=sleeps.append)
        clients.append(client)
        return client

    yield build
    for c in clients:
        c.close()

"""Prices, cost accounting and the cost limit checked before each call."""

from __future__ import annotations

import warnings

import pytest
from rgym_llm.client import ClientOptions, estimate_tokens
from rgym_llm.errors import ModelConfigError
from rgym_llm.openai_chat import OpenAIChatClient
from rgym_llm.prices import Price, PriceTable, load_price_file
from rgym_llm.testing import Reply

from rgym_core.agents import BudgetExceeded, EpisodeStatus
from rgym_core.specs import Budget

MESSAGES = [{"role": "user", "content": "x" * 3000}]


def test_lookup_order():
    table = PriceTable.load()
    assert table.lookup("gpt-4o") == Price(2.5, 10.0, cache_read=1.25)
    assert table.lookup("openai/gpt-4o-mini") == table.lookup("gpt-4o-mini")
    assert table.lookup("gpt-4o-mini-2024-07-18") == table.lookup("gpt-4o-mini")
    assert table.lookup("claude-sonnet-4-5-20250929").input == 3.0
    assert table.lookup("my-local-model") is None


def test_user_file_extends_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "prices.yaml"
    path.write_text("my-finetune: {input: 0.5, output: 1.5}\ngpt-4o:\n  input: 1\n  output: 2\n")
    monkeypatch.setenv("RGYM_PRICES", str(path))
    table = PriceTable.load()
    assert table.lookup("my-finetune") == Price(0.5, 1.5)
    assert table.lookup("gpt-4o") == Price(1.0, 2.0)
    assert table.lookup("o3") is not None


def test_bad_price_file_names_file_and_model(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("m1: {input: 1}\n")
    with pytest.raises(ModelConfigError, match=r"p\.yaml: m1: needs 'input' and 'output'"):
        load_price_file(path)
    path.write_text("m1: {input: 1, output: 2, outptu: 3}\n")
    with pytest.raises(ModelConfigError, match="unknown field.*outptu"):
        load_price_file(path)


def test_cost_with_cached_tokens(server, make_client):
    server.add(Reply(text="ok", input_tokens=1000, output_tokens=10))
    response = make_client().complete([{"role": "user", "content": "hi"}])
    assert response.usage.cost_usd == pytest.approx((1000 * 2 + 10 * 10) / 1e6)


def test_precall_check_stops_before_the_request(server, make_client):
    status = EpisodeStatus(budget=Budget(cost_limit_usd=0.05))
    status.usage.cost_usd = 0.04
    client = make_client()
    server.add(Reply(text="never"))
    # estimate: ~1000 prompt tokens * $2/M + 4096 output tokens * $10/M = ~$0.043 > $0.01 left
    with pytest.raises(BudgetExceeded) as info:
        client.complete(MESSAGES, status=status)
    assert info.value.kind == "cost"
    assert server.requests == []
    # a smaller max_tokens fits the remaining budget, and the call goes through
    response = client.complete(MESSAGES, max_tokens=100, status=status)
    assert response.text == "never" and len(server.requests) == 1


def test_estimate_is_an_upper_bound_of_the_fake_count(server, make_client):
    server.add(Reply(text="ok"))
    client = make_client()
    estimated, _ = client.estimate_cost(MESSAGES, None, 0)
    response = client.complete(MESSAGES, max_tokens=1)
    assert estimate_tokens(MESSAGES) >= response.usage.input_tokens
    assert estimated >= response.usage.input_tokens * 2e-6


def test_token_limit_is_checked_too(server, make_client):
    status = EpisodeStatus(budget=Budget(token_limit=1000))
    with pytest.raises(BudgetExceeded) as info:
        make_client().complete(MESSAGES, status=status)
    assert info.value.kind == "tokens" and server.requests == []


def test_unknown_model_costs_zero_with_one_warning(server):
    server.add(Reply(text="a", input_tokens=10, output_tokens=10),
               Reply(text="b", input_tokens=10, output_tokens=10))
    client = OpenAIChatClient("unpriced-model-xyz", provider="openai-compatible",
                              base_url=server.base_url, prices=PriceTable({}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = client.complete(MESSAGES)
        client.complete(MESSAGES)
    assert first.usage.cost_usd == 0
    assert len([w for w in caught if "unpriced-model-xyz" in str(w.message)]) == 1


def test_unknown_model_with_a_cost_limit_is_refused(server):
    client = OpenAIChatClient("unpriced-model", provider="openai-compatible",
                              base_url=server.base_url, prices=PriceTable({}))
    status = EpisodeStatus(budget=Budget(cost_limit_usd=1.0))
    with pytest.raises(ModelConfigError, match="RGYM_PRICES"):
        client.complete(MESSAGES, status=status)
    assert server.requests == []


def test_prices_option(server, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"models": {"house-model": {"input": 1, "output": 1}}}')
    server.add(Reply(text="ok", input_tokens=500_000, output_tokens=500_000))
    client = OpenAIChatClient("house-model", provider="openai-compatible", base_url=server.base_url,
                              options=ClientOptions(prices=str(path)))
    assert client.complete(MESSAGES).usage.cost_usd == pytest.approx(1.0)


@pytest.mark.parametrize(("model", "provider", "expected"), [
    ("o1", "openai", (15.0, 60.0)),
    ("claude-3-5-sonnet-20241022", "anthropic", (3.0, 15.0)),  # dated snapshot
    ("claude-3-5-sonnet-latest", "anthropic", (3.0, 15.0)),
    ("claude-3-opus-20240229", "anthropic", (15.0, 75.0)),  # listed as claude-3-opus-latest
    ("gemini-2.0-flash", "openai-compatible", (0.1, 0.4)),
    ("deepseek-chat", "openai-compatible", (0.135, 0.55)),
    ("anthropic/claude-sonnet-4.5", "openrouter", (3.0, 15.0)),  # with a dot, OpenRouter's entry
    ("openrouter/anthropic/claude-sonnet-4.5", "litellm", (3.0, 15.0)),
    ("meta-llama/llama-3.3-70b-instruct", "openrouter", (0.59, 0.79)),
    ("meta-llama/llama-3.3-70b-instruct:free", "openrouter", (0.0, 0.0)),
    ("Claude-Sonnet-4.5", None, (3.0, 15.0)),  # case and dots
    ("gpt-4o-2024-08-06", "openai", (2.5, 10.0)),
])
def test_shipped_table_matches_names_as_providers_spell_them(model, provider, expected):
    price = PriceTable.load().lookup(model, provider)
    assert price is not None and (price.input, price.output) == expected


def test_shipped_table_says_where_each_price_comes_from():
    import json
    from importlib import resources

    data = json.loads(resources.files("rgym_llm").joinpath("prices.json").read_text(encoding="utf-8"))
    assert "genai-prices" in data["_source"] and "No price is fetched at run time" in data["_source"]
    assert len(data["models"]) > 300
    for name, entry in data["models"].items():
        assert "/" in name, name  # provider-prefixed
        assert entry.get("source") and entry.get("date"), name
    assert PriceTable.load().lookup("o1").source == "genai-prices 0.2.3 (openai)"


def test_a_vendor_price_comes_before_a_host_price_and_unknown_names_stay_unknown():
    table = PriceTable.load()
    assert table.lookup("claude-sonnet-4-5-20250929").source.endswith("(anthropic)")
    assert table.lookup("my-local-model", "vllm") is None
    assert table.lookup("gpt-5-unknown-variant") is None  # no guessing from a prefix


def test_price_env_wins_over_the_prices_file(tmp_path, monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_text("gpt-4o: {input: 1, output: 2}\nmine: {input: 5, output: 5, source: our invoice}\n")
    monkeypatch.setenv("RGYM_PRICES", str(path))
    monkeypatch.setenv("RGYM_PRICE", "gpt-4o=0,0;other=1.5,3")
    table = PriceTable.load()
    assert table.lookup("gpt-4o", "openai") == Price(0.0, 0.0)
    assert table.lookup("other") == Price(1.5, 3.0)
    assert table.lookup("mine").source == "our invoice"
    monkeypatch.setenv("RGYM_PRICE", "gpt-4o=1")
    with pytest.raises(ModelConfigError, match=r"RGYM_PRICE 'gpt-4o=1': expected MODEL=IN,OUT"):
        PriceTable.load()


def test_successful_retries_are_recorded_on_the_response(server, make_client, sleeps):
    server.add(Reply(status=429, error="slow down", headers={"Retry-After": "0"}),
               Reply(status=500, error="boom"), Reply(text="ok"))
    response = make_client().complete(MESSAGES)
    assert response.text == "ok" and len(server.requests) == 3
    assert response.usage.retries == 2
    retries = response.raw["_retries"]
    assert [(r["attempt"], r["status"], r["error"]) for r in retries] == [
        (1, 429, "rate_limited"), (2, 500, "server_error")]
    assert retries[0]["wait_s"] == 0.0 and retries[0]["retry_after_s"] == 0.0
    assert retries[1]["wait_s"] == round(sleeps[1], 3) > 0  # the backoff slept
    plain = make_client()
    server.add(Reply(text="again"))
    assert "_retries" not in plain.complete(MESSAGES).raw

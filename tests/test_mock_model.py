"""The built-in mock model (mock/...): canned and scripted replies, latency, prices,
errors with the fix, and a whole react episode without a server or key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rgym_core import (
    Action,
    AgentConfig,
    AgentSpec,
    BudgetExceeded,
    EpisodeStatus,
    ModelProviderSpec,
    RegistryError,
    RunConfig,
    create_model_client,
    hookimpl,
    load_registry,
)
from rgym_core.mock_model import MockModelClient, MockModelError, MockOptions, create
from rgym_core.runner import run_episode
from rgym_core.specs import Budget
from rgym_core.testing import ScriptAgent, run_cli

TASK_MESSAGE = [{"role": "system", "content": "You are..."},
                {"role": "user", "content": "TASK...\nThe baseline is produced by: `python baseline.py`.\n"}]
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {}}}
         for name in ("bash", "validate", "submit", "open")]


def replies(client: MockModelClient, n: int, tools: list | None = None) -> list:
    return [client.complete(TASK_MESSAGE, tools=tools) for _ in range(n)]


def test_canned_models_through_the_registry() -> None:
    registry = load_registry()
    baseline = create_model_client("mock/baseline", registry=registry)
    texts = [r.text for r in replies(baseline, 4)]
    assert "```\npython baseline.py\n```" in texts[0]
    assert texts[1].endswith("```\nvalidate\n```") and texts[2].endswith("```\nsubmit\n```")
    assert texts[3].endswith("```\nsubmit\n```")  # after the script: submit
    assert [r.text for r in replies(create_model_client("mock/submit", registry=registry), 1)][0].endswith(
        "```\nsubmit\n```")


def test_tools_mode_gives_native_tool_calls() -> None:
    client = create("script", replies=["ls -a", "validate", {"tool": "open", "args": {"path": "a.py"}},
                                       {"text": "no command here"}])
    out = replies(client, 5, tools=TOOLS)
    assert [(c.name, c.arguments) for r in out[:3] for c in r.tool_calls] == [
        ("bash", {"command": "ls -a"}), ("validate", {}), ("open", {"path": "a.py"})]
    assert out[3].text == "no command here" and out[3].tool_calls == []
    assert out[4].tool_calls[0].name == "submit"
    assert all(r.usage.calls == 1 and r.usage.input_tokens > 0 for r in out)


def test_then_repeat_and_error() -> None:
    looped = create("script", replies=["a", "b"], then="repeat")
    assert [r.text.splitlines()[-2] for r in replies(looped, 5)] == ["a", "b", "a", "b", "a"]
    strict = create("script", replies=["a"], then="error")
    strict.complete(TASK_MESSAGE)
    with pytest.raises(MockModelError, match="no reply left"):
        strict.complete(TASK_MESSAGE)


def test_latency_and_price_and_the_cost_limit() -> None:
    client = create("submit", latency_s=0.2, input_price=1000.0, output_price=2000.0)
    started = time.monotonic()
    response = client.complete(TASK_MESSAGE)
    assert time.monotonic() - started >= 0.2
    expected = (response.usage.input_tokens * 1000 + response.usage.output_tokens * 2000) / 1e6
    assert response.usage.cost_usd == pytest.approx(expected)
    status = EpisodeStatus(budget=Budget(cost_limit_usd=0.01))
    with pytest.raises(BudgetExceeded):  # the pre-call check, as real clients do
        client.complete(TASK_MESSAGE * 50, status=status)


def test_replies_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "replies.yaml"
    path.write_text("- python train.py\n- {command: validate, thought: check it}\n")
    client = create("script", replies=str(path))
    first, second = replies(client, 2)
    assert "python train.py" in first.text and second.text.startswith("DISCUSSION\ncheck it")


@pytest.mark.parametrize(("model", "options", "message"), [
    ("nosuch", {}, "unknown mock model 'mock/nosuch'; the mock models are mock/submit"),
    ("script", {}, "mock/script needs replies"),
    ("submit", {"latency": 1}, "unknown option(s) latency; known:"),
    ("submit", {"then": "loop"}, "then must be one of submit, repeat, error"),
    ("submit", {"latency_s": -1}, "latency_s must be >= 0"),
    ("script", {"replies": "[1, 2]"}, "replies[0]: expected a command string"),
    ("script", {"replies": "/nonexistent/replies.yaml"}, "replies file /nonexistent/replies.yaml"),
])
def test_bad_configuration_is_an_error_naming_the_fix(model: str, options: dict, message: str) -> None:
    with pytest.raises(MockModelError) as info:
        create(model, **options)
    assert message in str(info.value)


def test_options_are_typed() -> None:
    opts = MockOptions.from_options({"latency_s": "0.5", "seed": "3", "replies": '["ls"]'})
    assert opts.latency_s == 0.5 and opts.seed == 3 and opts.replies == ["ls"]


def test_a_react_episode_on_the_mock_model_without_a_key(tmp_path: Path) -> None:
    proc = run_cli("run", "rgym/demo", "--agent", "react", "--model", "mock/script",
                   "--agent-option", 'replies=["python baseline.py", "validate", "submit"]',
                   "--agent-option", "input_price=1", "--runs-dir", str(tmp_path), "--json",
                   env={"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted" and result["steps"] == 3
    assert result["final_scores"]["r2"] == pytest.approx(result["baseline_scores"]["r2"])
    assert result["cost_usd"] > 0 and result["model"] == "mock/script"


class _ProviderAndAgent:
    """A plugin handed to the registry directly (no entry point, as ``--plugins``
    narrows a registry): a model provider ``here/fake`` and an agent that builds
    its client with the factory the runner hands it."""

    built: list[object] = []

    @hookimpl
    def rgym_register_model_providers(self) -> list[ModelProviderSpec]:
        return [ModelProviderSpec(name="here/fake", factory=create, description="mock, registered here")]

    @hookimpl
    def rgym_register_agents(self) -> list[AgentSpec]:
        return [AgentSpec(name="here/agent", factory=self.make, takes_model=True)]

    def make(self, config: AgentConfig) -> ScriptAgent:
        assert config.create_model_client is not None
        agent = ScriptAgent(Action(tool="submit"))
        agent.client = config.create_model_client(str(config.model))  # type: ignore[attr-defined]
        self.built.append(agent.client)  # type: ignore[attr-defined]
        return agent


def test_the_runner_hands_agents_its_own_registry_for_models(tmp_path: Path) -> None:
    registry = load_registry(extra_plugins=[("here", _ProviderAndAgent())])
    result = run_episode(RunConfig(task="rgym/demo", agent="here/agent", model="fake/submit",
                                   runs_dir=tmp_path, archive_workspace=False), registry)
    assert result.agent == "here/agent" and result.steps == 1, result
    [client] = _ProviderAndAgent.built
    assert isinstance(client, MockModelClient) and client.model == "submit"
    # Without the run's registry the provider is unknown: a second, default registry
    # would not have the plugins this run was given.
    with pytest.raises(RegistryError, match="fake"):
        create_model_client("fake/submit", registry=load_registry())

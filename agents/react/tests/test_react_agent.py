"""The ReAct agent against the loopback server, driven directly through the agent protocol."""

from __future__ import annotations

import json

import pytest
from react_test_scripts import fence
from rgym_agent_react.agent import ReactAgent
from rgym_llm.testing import Reply

from rgym_core import create_model_client
from rgym_core.aci import builtin_tools
from rgym_core.agents import (
    AgentConfig,
    AgentFormatError,
    BudgetExceeded,
    EpisodeStatus,
    TaskContext,
)
from rgym_core.records import Observation
from rgym_core.specs import Budget


def make_agent(server, *, provider="openai-compatible", budget=None, prices=None, **options):
    budget = budget or Budget(max_steps=30, time_limit_s=3600)
    status = EpisodeStatus(budget=budget)
    status.providers.append(lambda: {"memory_count": 2})
    context = TaskContext(task_id="t/demo", description="Predict y from x.",
                          tools=[t.schema for t in builtin_tools()], budget=budget, status=status,
                          baseline_scores={"r2": 0.5}, baseline_command="python baseline.py",
                          sandbox_facts={"memory": "8 GiB", "gpus": 0})
    base = server.url if provider == "anthropic" else server.base_url
    if prices:
        options["prices"] = str(prices)
    config = AgentConfig(model=f"{provider}/test-model", base_url=base, options=options)
    client_options = {k: v for k, v in options.items() if k not in ("mode", "history", "max_requeries",
                                                                     "max_tokens", "temperature",
                                                                     "status")}
    client = create_model_client(config.model, base_url=base, backoff_initial_s=0.01,
                                 api_key_env="RGYM_TEST_KEY", **client_options)
    agent = ReactAgent(config, client=client)
    agent.start(context)
    return agent, status


OPENING = Observation(output="The workspace is ready. Files: baseline.py data")


def test_text_mode_first_turn(server, monkeypatch):
    monkeypatch.setenv("RGYM_TEST_KEY", "k-123456")
    server.add(Reply(text=fence("Read the baseline.", "open baseline.py 5"), input_tokens=100,
                     output_tokens=20))
    agent, _ = make_agent(server)
    action = agent.act(OPENING)
    assert (action.tool, action.args) == ("open", {"path": "baseline.py", "line_number": 5})
    assert action.thought.startswith("DISCUSSION")
    assert action.usage.calls == 1 and action.usage.input_tokens == 100
    [request] = server.requests
    system, user = request.json["messages"]
    assert system["role"] == "system" and "edit <start_line>:<end_line>" in system["content"]
    assert "Predict y from x." in user["content"] and "BASELINE SCORES (to beat): r2=0.5" in user["content"]
    assert "Step 1 of 30, 30 left" in user["content"] and "memory count: 2" in user["content"]
    assert "files: baseline.py" in user["content"].lower()
    [call] = action.llm_calls
    assert call["messages"] == request.json["messages"] and call["prefix_messages"] == 0
    assert call["response"] == action.raw
    assert call["input_tokens"] == 100 and call["output_tokens"] == 20 and call["latency_s"] >= 0


def test_the_status_block_can_be_turned_off(server, monkeypatch):
    """``--agent-option status=off``: no budget status in the conversation (on by default,
    as the first-turn test shows); anything else than on/off is refused by name."""
    monkeypatch.setenv("RGYM_TEST_KEY", "k-123456")
    server.add(Reply(text=fence("Read it.", "ls")), Reply(text=fence("Again.", "ls")))
    agent, _ = make_agent(server, status="off")
    agent.act(OPENING)
    agent.act(Observation(output="baseline.py data"))
    for request in server.requests:
        text = " ".join(m["content"] for m in request.json["messages"] if isinstance(m["content"], str))
        assert "Step 1 of 30" not in text and "memory count" not in text
    with pytest.raises(ValueError, match="status must be 'on' or 'off', got 'maybe'"):
        ReactAgent(AgentConfig(model="openai-compatible/test-model", base_url=server.base_url,
                               options={"status": "maybe"}))


def test_requeries_then_format_error(server):
    server.add(Reply(text="no command here"), Reply(text=fence("a", "ls") + "\n```\npwd\n```"),
               Reply(text=fence("b", "vim a.py")), Reply(text=fence("c", "ls -a")))
    agent, _ = make_agent(server)
    action = agent.act(OPENING)
    assert action.args == {"command": "ls -a"}
    assert len(action.llm_calls) == 4 and action.usage.calls == 4
    assert [c["requery"] for c in action.llm_calls] == [0, 1, 2, 3]
    assert "vim" in server.requests[3].json["messages"][-1]["content"]
    # the failed exchanges are not kept: the next request holds one assistant reply
    server.add(*[Reply(text="still no command")] * 4)
    with pytest.raises(AgentFormatError, match="4 replies") as info:
        agent.act(Observation(output="a b c"))
    assert info.value.usage.calls == 4 and len(info.value.llm_calls) == 4
    roles = [m["role"] for m in server.requests[4].json["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert len(server.requests) == 8


def test_history_is_elided_and_llm_calls_reconstruct_the_prompts(server):
    server.add(*[Reply(text=fence(f"step {i}", f"echo {i}")) for i in range(5)])
    agent, _ = make_agent(server, history=2)
    actions = [agent.act(OPENING)]
    for i in range(4):
        actions.append(agent.act(Observation(output=f"output {i}\nmore")))
    last = server.requests[-1].json["messages"]
    observations = [m["content"] for m in last[2:] if m["role"] == "user"]
    assert observations[:2] == ["Old output omitted (4 lines).", "Old output omitted (4 lines)."]
    assert observations[2].startswith("output 2") and observations[3].startswith("output 3")
    # each call's messages = the previous call's first `prefix_messages` + the new ones
    previous: list = []
    for action, request in zip(actions, server.requests, strict=True):
        [call] = action.llm_calls
        rebuilt = previous[:call["prefix_messages"]] + call["messages"]
        assert rebuilt == request.json["messages"]
        previous = rebuilt


@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_tools_mode(server, monkeypatch, provider):
    monkeypatch.setenv("RGYM_TEST_KEY", "k-123456")
    server.add(Reply.tool("open", {"path": "baseline.py"}, text="Looking."),
               Reply(text="I think I am done."),  # no tool call: re-queried
               Reply.tool("validate", {}))
    agent, _ = make_agent(server, provider=provider, mode="tools")
    first = agent.act(OPENING)
    assert (first.tool, first.args, first.thought) == ("open", {"path": "baseline.py"}, "Looking.")
    assert first.call_id
    second = agent.act(Observation(output="[File: baseline.py (19 lines total)]"))
    assert second.tool == "validate" and len(second.llm_calls) == 2
    body = server.requests[1].json
    if provider == "anthropic":
        names = [t["name"] for t in body["tools"]]
        last_user = body["messages"][-1]["content"]
        assert last_user[0]["type"] == "tool_result" and last_user[0]["tool_use_id"] == first.call_id
    else:
        names = [t["function"]["name"] for t in body["tools"]]
        tool_message = body["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == first.call_id
        assert tool_message["content"].startswith("[File: baseline.py")
    assert {"bash", "open", "edit", "validate", "submit"} <= set(names)
    assert "call" in json.dumps(server.requests[2].json["messages"][-1]).lower()


def test_budget_exceeded_counts_requeries_and_propagates(server, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("test-model: {input: 100, output: 100}\n")
    server.add(Reply(text="no command", input_tokens=2000, output_tokens=10), Reply(text="never"))
    agent, status = make_agent(server, budget=Budget(cost_limit_usd=0.3), prices=prices,
                               max_tokens=100)
    with pytest.raises(BudgetExceeded) as info:
        agent.act(OPENING)
    assert info.value.kind == "cost"
    assert len(server.requests) == 1  # the re-query would have crossed the limit
    assert info.value.usage.cost_usd == pytest.approx(2010 * 100 / 1e6)
    assert len(info.value.llm_calls) == 1


def test_only_the_first_of_several_tool_calls_runs(server):
    server.add(Reply(tool_calls=[{"name": "bash", "arguments": {"command": "ls"}},
                                 {"name": "validate", "arguments": {}}]),
               Reply.tool("submit", {}))
    agent, _ = make_agent(server, mode="tools")
    first = agent.act(OPENING)
    assert (first.tool, first.args) == ("bash", {"command": "ls"})
    assert len(agent.history.messages()[-1]["tool_calls"]) == 1
    agent.act(Observation(output="a.py"))
    tool_message = server.requests[1].json["messages"][-1]
    assert tool_message["content"].startswith("(Only the first of your 2 tool calls was run")


@pytest.mark.parametrize(("profile", "options", "sent"), [
    ("mlgym", {}, {"temperature": 0.0, "top_p": 0.95}),        # MLGym's benchmark settings
    ("mlgym", {"temperature": "0.3", "top_p": "1.0"}, {"temperature": 0.3, "top_p": 1.0}),
    ("cpu", {}, {}),                                            # other profiles: the server's
    (None, {"top_p": "0.5"}, {"top_p": 0.5}),
])
def test_generation_settings_follow_the_mlgym_profile(server, monkeypatch, profile, options, sent):
    monkeypatch.setenv("RGYM_TEST_KEY", "k-123456")
    server.add(Reply(text=fence("Look.", "ls"), input_tokens=10, output_tokens=5))
    budget = Budget(max_steps=5)
    context = TaskContext(task_id="t/demo", description="d", tools=[t.schema for t in builtin_tools()],
                          budget=budget, status=EpisodeStatus(budget=budget))
    config = AgentConfig(model="openai-compatible/test-model", base_url=server.base_url,
                         options={"api_key_env": "RGYM_TEST_KEY", **options}, profile=profile)
    agent = ReactAgent(config)
    agent.start(context)
    agent.act(OPENING)
    [request] = server.requests
    assert {k: request.json[k] for k in ("temperature", "top_p") if k in request.json} == sent

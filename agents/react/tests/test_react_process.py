"""The react agent with ``--agent-isolation process``: the scaffold runs in its own
confined process (no network, no API key) and the runner makes every model call
against the loopback server, in the real wire format; budgets and usage hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from react_test_scripts import demo_costly_script, demo_text_script
from rgym_llm.testing import FakeLLMServer
from test_react_episode import KEY, assert_key_never_written, run_rgym, steps_of


def test_react_episode_in_its_own_process(tmp_path: Path) -> None:
    replies = demo_text_script()
    with FakeLLMServer(replies) as server:
        result, records, run_dir = run_rgym(tmp_path, server, "--agent-isolation", "process")
        requests = list(server.requests)
    assert server.errors == []
    assert len(requests) == len(replies)
    # the runner made the calls, with its key; the scaffold never saw the key
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)
    steps = steps_of(records)
    assert [s["action"]["tool"] for s in steps] == ["open", "edit", "edit", "edit", "bash", "validate",
                                                    "submit"]
    calls = [c for s in steps for c in s["action"]["llm_calls"]]
    assert len(calls) == len(requests)
    previous: list = []
    for call, request in zip(calls, requests, strict=True):
        rebuilt = previous[:call["prefix_messages"]] + call["messages"]
        assert rebuilt == request.json["messages"]
        previous = rebuilt
    # usage is the runner's own count, and matches what the scaffold recorded
    assert result["input_tokens"] == sum(c["input_tokens"] for c in calls) > 0
    assert result["output_tokens"] == sum(c["output_tokens"] for c in calls) > 0
    assert result["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls), abs=1e-6)
    assert result["status"] == "submitted", (result.get("error"), result.get("agent_error"))
    assert result["final_scores"]["r2"] > 0.9 > result["baseline_scores"]["r2"]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["run"]["agent_isolation"] == "process"
    assert (run_dir / "agent_process.log").is_file()
    assert_key_never_written(run_dir)


def test_cost_limit_holds_in_its_own_process(tmp_path: Path) -> None:
    limit = 1.0
    replies = demo_costly_script()
    with FakeLLMServer(replies) as server:
        result, records, run_dir = run_rgym(tmp_path, server, "--agent-isolation", "process",
                                            "--cost-limit", str(limit), "--agent-option", "max_tokens=100",
                                            price="{input: 100, output: 100}")
        sent = len(server.requests)
    assert result["status"] == "autosubmitted_cost", (result.get("error"), result.get("agent_error"))
    assert 0 < result["cost_usd"] <= limit
    assert sent < len(replies)
    stops = [r for r in records if r["type"] == "agent_stop"]
    assert stops and stops[0]["reason"] == "cost"
    recorded = sum(c["cost_usd"] for s in steps_of(records) for c in s["action"]["llm_calls"])
    assert recorded == pytest.approx(result["cost_usd"], abs=1e-6)
    assert_key_never_written(run_dir)

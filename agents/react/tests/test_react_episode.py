"""End to end: `rgym run rgym/demo --agent react` as a subprocess against the
loopback server, as a new user would run it against vLLM."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from react_test_scripts import demo_costly_script, demo_text_script, demo_tools_script
from rgym_llm.testing import FakeLLMServer

KEY = "sk-e2e-NEVER-WRITE-ME-9f8e7d"


def run_rgym(tmp_path: Path, server: FakeLLMServer, *extra: str, price: str = "{input: 2, output: 10}",
             base_url: str | None = None):
    prices = tmp_path / "prices.yaml"
    prices.write_text(f"test-model: {price}\n")
    env = {**os.environ, "RGYM_PRICES": str(prices), "OPENAI_API_KEY": KEY}
    proc = subprocess.run(
        [sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--agent", "react",
         "--model", "openai-compatible/test-model", "--base-url", base_url or server.base_url,
         "--runs-dir", str(tmp_path / "runs"), "--json", *extra],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    run_dir = Path(result["run_dir"])
    records = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    return result, records, run_dir


def steps_of(records):
    return [r["step"] for r in records if r["type"] == "step"]


def assert_key_never_written(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            assert KEY.encode() not in data, f"the API key leaked into {path}"


@pytest.mark.parametrize("mode,script", [("text", demo_text_script), ("tools", demo_tools_script)])
def test_react_episode_end_to_end(tmp_path, mode, script):
    replies = script()
    with FakeLLMServer(replies) as server:
        # tools mode takes the bare http://127.0.0.1:PORT a vLLM user may type (/v1 is added)
        result, records, run_dir = run_rgym(tmp_path, server, "--agent-option", f"mode={mode}",
                                            base_url=server.url if mode == "tools" else None)
        requests = list(server.requests)
    assert server.errors == []
    assert len(requests) == len(replies)  # every scripted reply was asked for, none more
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)
    steps = steps_of(records)
    assert [s["action"]["tool"] for s in steps] == ["open", "edit", "edit", "edit", "bash", "validate",
                                                    "submit"]
    rejected = steps[1]["observation"]
    assert rejected["error"] and "undefined name 'intercept'" in rejected["output"]
    assert not steps[2]["observation"]["error"] and not steps[3]["observation"]["error"]
    # every prompt and response is in the trajectory, with tokens and cost
    calls = [c for s in steps for c in s["action"]["llm_calls"]]
    assert len(calls) == len(requests)
    previous: list = []
    for call, request in zip(calls, requests, strict=True):
        rebuilt = previous[:call["prefix_messages"]] + call["messages"]
        assert rebuilt == request.json["messages"]
        previous = rebuilt
        assert call["input_tokens"] > 0 and call["output_tokens"] > 0
        assert call["cost_usd"] == pytest.approx((call["input_tokens"] * 2 + call["output_tokens"] * 10) / 1e6)
    assert result["input_tokens"] == sum(c["input_tokens"] for c in calls)
    assert result["output_tokens"] == sum(c["output_tokens"] for c in calls)
    assert result["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls), abs=1e-6)
    if mode == "text":
        assert [c["requery"] for c in steps[0]["action"]["llm_calls"]] == [0, 1]
        assert "vim" in steps[2]["action"]["llm_calls"][0]["response"]
    # the episode is graded
    assert result["status"] == "submitted", result.get("error")
    assert result["final_scores"]["r2"] > 0.9 > result["baseline_scores"]["r2"]
    assert_key_never_written(run_dir)


def test_cost_limit_stops_before_it_is_crossed(tmp_path):
    limit = 1.0
    replies = demo_costly_script()
    with FakeLLMServer(replies) as server:
        # $100 per million tokens: the whole conversation costs about $2.5
        result, records, run_dir = run_rgym(tmp_path, server, "--cost-limit", str(limit),
                                            "--agent-option", "max_tokens=100",
                                            price="{input: 100, output: 100}")
        sent = len(server.requests)
    assert result["status"] == "autosubmitted_cost"
    assert 0 < result["cost_usd"] <= limit
    assert sent < len(replies)
    stops = [r for r in records if r["type"] == "agent_stop"]
    assert stops and stops[0]["reason"] == "cost"
    recorded = sum(c["cost_usd"] for s in steps_of(records) for c in s["action"]["llm_calls"])
    assert recorded == pytest.approx(result["cost_usd"], abs=1e-6)
    assert_key_never_written(run_dir)

"""The ``mlgym`` profile end to end through the CLI: the react agent (mock model) reads
MLGym's statement, sees MLGym's status lines, searches with grep regular expressions, is
refused an edit with a new E111, runs under MLGym's timeouts (overridden here to keep the
test short) and stops at MLGym's $4 cost limit unless told otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TASK = "mlgym/battle-of-sexes"


def rgym(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def run(tmp_path: Path, replies: list[Any], *args: str) -> tuple[dict, list[dict]]:
    """The result (with the run's ``budget`` from config.json) and the steps."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    out = rgym("run", TASK, "--agent", "react", "--model", "mock/script", "--agent-option",
               f"replies={tmp_path / 'replies.json'}", "--runs-dir", str(tmp_path / "runs"),
               "--json", *args, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout)
    result["budget"] = json.loads((Path(result["run_dir"]) / "config.json").read_text())["budget"]
    lines = (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines if json.loads(line)["type"] == "step"]
    return result, steps


def sent(step: dict) -> str:
    """The last user message the model saw before choosing this step's action."""
    messages = step["action"]["llm_calls"][-1]["messages"]
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def test_an_mlgym_profile_episode_gets_mlgyms_prompt_aci_and_budgets(tmp_path: Path) -> None:
    replies = [
        "open strategy.py",
        "search_dir 'def row_[a-z]*(history)'",  # a grep basic regex: `(` is literal
        "mkdir -p sub && cd sub",
        "sleep 5",                                  # not a training command: --action-timeout
        "python3 -c 'import time; time.sleep(3); print(42)'",  # a training command: --training-timeout
        {"text": "DISCUSSION\nA helper.\n```\ncreate helper.py\ndef f():\n    return 1\n"
                 "end_of_create\n```"},
        {"text": "DISCUSSION\nTwo spaces.\n```\nedit 2:2\n  return 2\nend_of_edit\n```"},
        "validate",
        "submit",
    ]
    result, every = run(tmp_path, replies, "--profile", "mlgym", "--action-timeout", "2",
                        "--training-timeout", "60", "--tool-option", "rgym.window=5")
    assert result["status"] == "submitted" and result["profile"] == "mlgym"
    assert result["budget"]["time_limit_s"] is None and result["budget"]["max_steps"] == 50
    tools = [s["action"]["tool"] for s in every]
    assert tools == ["open", "search_dir", "bash", "bash", "bash", "create", "edit", "validate",
                     "submit"]
    first, steps = sent(every[0]), every[1:]
    # MLGym's window is 1000 lines; --tool-option overrides it (strategy.py has 22 lines)
    opened = sent(steps[0]).split("(Step")[0]
    assert "5:" in opened and "6:" not in opened and "(17 more lines below)" in opened
    # MLGym's statement (configs/tasks/battleOfSexes.yaml), payoff example and all
    assert "Here is a example of the payoffs depending on your and your partner strategy:" in first
    assert "Do not submit until the last step" in first
    assert "2 s for one call" not in first  # rgym's own statement is not sent under this profile
    assert "(Open file: n/a)\n(Current directory: /workspace)" in first
    assert "cost $0.0000 of $4" in first
    assert "strategy.py (1 matches)" in steps[0]["observation"]["output"]
    assert "(Current directory: /workspace/sub)" in sent(steps[2])
    assert steps[2]["observation"]["info"]["timed_out"] is True
    assert "timed out after 2 s" in steps[2]["observation"]["output"]
    assert steps[3]["observation"]["info"]["timed_out"] is False
    assert "42" in steps[3]["observation"]["output"]
    assert "(Open file: /workspace/sub/helper.py)" in sent(steps[5])
    edit = steps[5]["observation"]
    assert edit["error"] and "line 2: indentation is not a multiple of 4 [E111]" in edit["output"]
    assert edit["info"]["applied"] is False


def test_the_default_profile_keeps_rgyms_statement_budget_and_literal_search(tmp_path: Path) -> None:
    result, steps = run(tmp_path, ["search_dir 'def row_[a-z]*(history)'", "submit"])
    assert result["profile"] == "rgym" and result["budget"]["time_limit_s"] == 3600
    first = sent(steps[0])
    assert "2 s for one call" in first and "Here is a example of the payoffs" not in first
    assert "No matches found" in steps[0]["observation"]["output"]
    assert "cost $0.0000)" in first  # no cost limit of the agent's outside the mlgym profile


def test_mlgyms_4_dollar_limit_ends_the_episode_unless_lifted(tmp_path: Path) -> None:
    # over 1,000 tokens a call at $40,000 per million: the first call crosses $4
    price = ("--agent-option", "input_price=40000")
    result, steps = run(tmp_path / "a", ["ls", "submit"], "--profile", "mlgym", *price)
    assert result["end_reason"] == "cost" and result["status"].startswith("autosubmitted")
    assert result["cost_usd"] >= 4
    assert steps == []  # the call that crossed the limit is not acted on, as in MLGym
    result, steps = run(tmp_path / "b", ["ls", "submit"], "--profile", "mlgym", *price,
                        "--agent-option", "cost_limit=none")
    assert result["status"] == "submitted" and [s["action"]["tool"] for s in steps] == ["bash", "submit"]

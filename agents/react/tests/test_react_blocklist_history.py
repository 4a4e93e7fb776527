from __future__ import annotations

import pytest
from rgym_agent_react.blocklist import blocked_reason
from rgym_agent_react.history import History
from rgym_agent_react.prompts import status_block


@pytest.mark.parametrize("command", ["vim train.py", "cd src && nano a.py", "python", "python3 ",
                                     "bash", "FOO=1 less log.txt", "sudo vi x", "ls | more"])
def test_interactive_commands_are_blocked(command):
    assert blocked_reason(command)


@pytest.mark.parametrize("command", ["python train.py", "python -c 'print(1)'", "bash run.sh",
                                     "grep -r vim .", "echo top", "ls -la; cat a.py"])
def test_ordinary_commands_pass(command):
    assert blocked_reason(command) is None


def test_history_keeps_last_n_observations_and_the_task():
    history = History(keep=2)
    history.add({"role": "user", "content": "the task"})
    for i in range(4):
        history.add({"role": "assistant", "content": f"command {i}"})
        history.add({"role": "user", "content": f"output {i}\nline 2"}, observation=True)
    sent = history.messages()
    assert sent[0]["content"] == "the task"
    contents = [m["content"] for m in sent if m["role"] == "user"][1:]
    assert contents == ["Old output omitted (2 lines).", "Old output omitted (2 lines).",
                        "output 2\nline 2", "output 3\nline 2"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [f"command {i}" for i in range(4)]


def test_status_block_shows_budget_resources_and_tool_facts():
    text = status_block({"steps_used": 4, "steps_left": 46, "max_steps": 50, "elapsed_s": 600.0,
                         "time_left_s": 3000.0, "cost_usd": 0.25, "cost_limit_usd": 4.0,
                         "tokens": 1000, "token_limit": None, "memory": "16 GiB",
                         "gpus": [{"name": "H100", "memory": "80 GiB"}], "memory_count": 3})
    assert "Step 5 of 50, 46 left" in text
    assert "time left 50m00s of 1h00m" in text
    assert "cost $0.2500 of $4" in text
    assert "memory: 16 GiB" in text and "gpus: name H100, memory 80 GiB" in text
    assert "memory count: 3" in text

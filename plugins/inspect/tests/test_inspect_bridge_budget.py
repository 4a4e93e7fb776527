"""The ``rgym`` sandbox in-process, without an eval: its ``exec`` calls are an rgym
episode's ``bash`` steps (argv, input, cwd and env written into the shell command),
and once a budget ends the episode every further call says so."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from attrs import evolve
from inspect_ai.util import SandboxUserUnsupportedError
from rgym_inspect.sandbox import (
    RgymSandboxConfig,
    RgymSandboxEnvironment,
    load_task_spec,
    shell_command,
)

TASK = "mlgym/prisoners-dilemma"


def test_shell_command_writes_the_exec_options_into_one_line() -> None:
    assert shell_command(["ls", "-l", "a b"]) == "ls -l 'a b'"
    assert shell_command(["cd", "/"]) == "(cd /)"  # the episode's shell keeps its folder
    assert shell_command(["pwd"], cwd="sub dir") == "(cd 'sub dir' && pwd)"
    assert shell_command(["python3", "-"], input="print('hi')\n", env={"A": "1"}, timeout=5) == \
        "printf '%s' 'print('\"'\"'hi'\"'\"')\n' | env A=1 timeout -k 5 5 python3 -"
    assert shell_command(["cat"], input=b"\x00\xff") == "printf '%s' AP8= | base64 -d | cat"


def test_exec_steps_then_the_step_budget_ends_the_episode(tmp_path: Path) -> None:
    env = RgymSandboxEnvironment(load_task_spec(TASK), RgymSandboxConfig(task=TASK, runs_dir=str(tmp_path)))
    env.run_config = evolve(env.run_config, max_steps=4)

    async def play() -> list[object]:
        seen: list[object] = [await env.exec(["python3", "-"], input="print(6 * 7)")]
        seen.append(await env.exec(["cd", "/"]))
        seen.append(await env.exec(["sh", "-c", 'pwd; echo "$FOO"'], env={"FOO": "bar"}))
        seen.append(await env.read_file("strategy.py"))
        with pytest.raises(SandboxUserUnsupportedError):
            await env.exec(["id"], user="root")
        seen.append(await env.exec(["pwd"], cwd="/"))  # the fourth step: the budget's last
        seen.append(await env.exec(["echo", "too late"]))
        with pytest.raises(PermissionError, match="max_steps"):
            await env.write_file("strategy.py", "x")
        seen.append(await env.finish())
        return seen

    python, cd, shell, starter, last, late, result = anyio.run(play)
    assert python.success and python.stdout == "42\n"
    assert cd.success
    assert shell.stdout == "/workspace\nbar\n"  # the `cd /` ran in a subshell
    assert "def row_strategy" in starter
    assert last.stdout == "/\n"
    assert not late.success and "episode has ended (max_steps)" in late.stderr and late.stdout == ""
    assert result.end_reason.value == "max_steps" and result.status.value == "autosubmitted_max_steps"
    assert result.final_scores and result.steps == 4
    run_dir = Path(result.run_dir)
    assert tmp_path in run_dir.parents
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    commands = [r["step"]["action"]["args"]["command"] for r in steps if r["type"] == "step"]
    assert commands == ["printf '%s' 'print(6 * 7)' | python3 -", "(cd /)",
                        "env FOO=bar sh -c 'pwd; echo \"$FOO\"'", "(cd / && pwd)"]


def test_the_wall_clock_budget_ends_an_episode_waiting_for_the_model(tmp_path: Path) -> None:
    """The model thinks past ``time_limit_s`` between two tool calls: the bridge agent
    stops the episode with rgym's time budget, and the late call says so."""
    env = RgymSandboxEnvironment(load_task_spec(TASK), RgymSandboxConfig(task=TASK, runs_dir=str(tmp_path)))
    env.run_config = evolve(env.run_config, time_limit_s=2.0)

    async def play() -> list[object]:
        first = await env.exec(["true"])
        await anyio.sleep(3)
        return [first, await env.exec(["true"]), await env.finish()]

    first, late, result = anyio.run(play)
    assert first.success
    assert not late.success and "episode has ended (time)" in late.stderr
    assert result.end_reason.value == "time" and result.status.value == "autosubmitted_time"
    assert result.final_scores and result.steps == 1

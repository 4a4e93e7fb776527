"""Whole local episodes under attack: every attack ends as an observation or an
evaluation error in the run directory, never a crash of the runner, and the host is
untouched (issue 10, item 7)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rgym_core.agents import TaskContext
from rgym_core.records import Action, ExitStatus, Observation
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, run_episode


class ListAgent:
    """Plays a list of actions, then submits; keeps what it saw."""

    def __init__(self, *actions: Action) -> None:
        self.actions = list(actions)
        self.observations: list[Observation] = []

    def start(self, context: TaskContext) -> None:
        self.context = context

    def act(self, observation: Observation) -> Action:
        self.observations.append(observation)
        return self.actions.pop(0) if self.actions else Action(tool="submit")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


@pytest.fixture(scope="module")
def registry() -> Any:
    return load_registry()


def test_hostile_episode_ends_in_observations_and_errors(registry: Any, tmp_path: Path) -> None:
    planted = Path("/tmp") / f"rgym-pwned-{os.getpid()}"
    watched = [Path("/etc/passwd"), Path("/etc/hostname")]
    before = {p: _digest(p) for p in watched}
    agent = ListAgent(
        # Names and links aimed at the copy for grading (the old `ls -A1` parser copied `..`).
        Action.bash("python baseline.py >/dev/null; "
                    "cp baseline.py \"$(printf 'baseline.py\\n..')\"; ln -sf /etc/passwd "
                    "scores.json; mkdir -p ../escape 2>&1; "
                    f"echo 'import os; open(\"{planted}\", \"w\").close()' > usercustomize.py; "
                    f"ln -s {planted} sitecustomize.py; echo planted"),
        # A grader-time timebomb and a stray that outlives the episode.
        Action.bash(f"(env -i setsid sh -c 'sleep 3; touch {planted}' >/dev/null 2>&1 &); "
                    "echo started"),
        Action(tool="validate"),  # graded with all of the above in the workspace
        # Process exhaustion, then a shell that kills everything it can (itself included).
        Action.bash("bomb() { bomb | bomb & }; bomb; sleep 60"),
        Action.bash("kill -9 -1"),
        Action.bash("echo still-working"),
        # More than the workspace quota (2 GiB by default), sparse so it costs nothing.
        Action.bash("truncate -s 2G a.bin && truncate -s 1G b.bin && ls"),
        Action(tool="submit"),
    )
    result = run_episode(RunConfig(task="rgym/demo", runs_dir=tmp_path / "runs", pids=300,
                                   action_timeout_s=8), registry, agent=agent)
    run_dir = Path(result.run_dir)
    assert (run_dir / "result.json").is_file()
    assert result.status != ExitStatus.ERROR, result.error
    outputs = [o.output for o in agent.observations]
    assert "planted" in outputs[1] and "started" in outputs[2]
    assert "still-working" in outputs[6]
    validated, final = json.loads((run_dir / "result.json").read_text())["scores"][-2:]
    assert validated["kind"] == "validate" and validated["valid"], validated  # names dropped
    assert not final["valid"] and "quota" in final["error"], final
    subprocess.run(["sleep", "4"], check=True)  # the stray would have fired by now
    assert not planted.exists()
    assert {p: _digest(p) for p in watched} == before
    assert not (Path(result.run_dir).parent / "escape").exists()

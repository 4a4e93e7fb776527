"""The solver ``rgym_inspect/rgym_agent``: an rgym agent plays the sample as a whole
``rgym run`` episode.

``inspect eval rgym_inspect/rgym_task -T task=T --solver rgym_inspect/rgym_agent
-S agent=baseline`` runs ``rgym run T --agent baseline --json`` in a subprocess: the
episode has rgym's own sandbox, budgets, grader and integrity monitor, and leaves its
run directory under ``runs_dir``.  Its result (``result.json``'s content) goes into
the sample's store under :data:`RESULT_KEY`, where :func:`rgym_inspect.scorer.rgym_scorer`
reads the final score and the integrity verdict; the ``rgym`` sandbox's own episode
never starts (it starts on first use, and this solver does not use the sandbox).

The episode's model is an rgym model name (``model``: ``mock/...``, ``openai/...``
as ``rgym run --model`` takes it), not the Inspect model of the eval: rgym's agents
call models through rgym's clients.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
from inspect_ai.model import ChatMessageAssistant
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import store

#: The store key of the rgym episode's result.
RESULT_KEY = "rgym_episode"


def rgym_command() -> str:
    """The ``rgym`` command of this environment (beside the Python running Inspect)."""
    beside = Path(sys.executable).with_name("rgym")
    found = str(beside) if beside.is_file() else shutil.which("rgym")
    if not found:
        raise RuntimeError("the rgym command is not installed beside inspect (pip install rgym-core)")
    return found


@solver
def rgym_agent(agent: str = "baseline", model: str | None = None, sandbox: str = "local",
               runs_dir: str = "runs", options: dict[str, Any] | None = None,
               timeout: float | None = None) -> Solver:
    """Run the rgym agent ``agent`` on the sample's rgym task (``metadata["rgym_task"]``)
    with rgym's ``sandbox`` backend, ``model`` and agent ``options``; the run directory
    goes under ``runs_dir``.  ``timeout``: seconds before the episode is killed
    (default: the task's own time budget, which rgym enforces)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        task = state.metadata["rgym_task"]
        argv = [rgym_command(), "run", task, "--agent", agent, "--sandbox", sandbox,
                "--runs-dir", runs_dir, "--json"]
        if state.metadata.get("rgym_profile"):
            argv += ["--profile", state.metadata["rgym_profile"]]
        if model:
            argv += ["--model", model]
        for key, value in (options or {}).items():
            argv += ["--agent-option", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
        with anyio.fail_after(timeout):
            done = await anyio.run_process(argv, check=False)
        out = done.stdout.decode(errors="replace")
        try:
            result = json.loads(out)
        except json.JSONDecodeError:
            raise RuntimeError(f"rgym run failed (exit {done.returncode}): "
                               f"{(out + done.stderr.decode(errors='replace'))[-2000:]}") from None
        store().set(RESULT_KEY, result)
        state.messages.append(ChatMessageAssistant(
            content=f"rgym agent {result.get('agent')} ended ({result.get('end_reason')}) after "
                    f"{result.get('steps')} steps; run directory {result.get('run_dir')}",
            model=model or agent))
        state.completed = True
        return state

    return solve

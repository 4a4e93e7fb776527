"""MLGym's ``.traj`` trajectory files: reading and checking one.

MLGym's agent (``mlgym/agent/base.py``, ``save_trajectory``) writes one JSON file
per episode::

    {"environment": "mlgym_main",
     "trajectory": [{"action": "ls\\n", "observation": "...", "response": "...",
                     "thought": "...", "state": "{...}", "execution_time": 0.3}, ...],
     "history": [{"role": "system", "content": "...", "agent": "primary"}, ...],
     "info": {"model_stats": {...}, "exit_status": "submitted", "score": [{"Score": 1.15}, ...]}}

Each step's ``action`` is a text command in MLGym's ACI syntax (``open "train.py"``,
``edit 10:12`` ... ``end_of_edit``, ``validate``), which
:func:`rgym_core.aci.commands.parse_command` reads.  :func:`read_traj` is shared by
``rgym import mlgym-traj`` (the view plugin) and the replay agent; a file not in
this format is reported as one line naming the file, the field and the fix.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: The suffix of MLGym's trajectory files.
TRAJ_SUFFIX = ".traj"
#: The shape of a ``.traj`` file, for error messages.
FORMAT_HINT = ("MLGym's agent writes {\"trajectory\": [...], \"history\": [...], \"info\": {...}} "
               "(mlgym/agent/base.py save_trajectory)")


class TrajFormatError(ValueError):
    """A ``.traj`` file not in MLGym's format; ``str(err)`` is one line naming the
    file, the field and the fix."""


def _fail(path: Path, field: str, problem: str, fix: str) -> TrajFormatError:
    return TrajFormatError(f"{path}: {field}: {problem} ({fix})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float (a numeric string too), else None (a bool is not a number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def read_traj(path: Path) -> dict[str, Any]:
    """The parsed and checked ``.traj`` file (:class:`TrajFormatError` otherwise)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrajFormatError(f"{path}: no such file (give MLGym's .traj files or folders holding them)") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajFormatError(f"{path}: cannot be read: {exc} (give a UTF-8 JSON .traj file)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"line {exc.lineno} column {exc.colno}", f"not JSON: {exc.msg}",
                    FORMAT_HINT) from None
    if not isinstance(data, dict):
        raise _fail(path, "(top level)", f"expected a JSON object, got {type(data).__name__}", FORMAT_HINT)
    steps = data.get("trajectory")
    if not isinstance(steps, list):
        problem = "missing" if "trajectory" not in data else f"expected a list, got {_shown(steps)}"
        raise _fail(path, "trajectory", problem, "a list of steps with action, observation, thought")
    for n, step in enumerate(steps):
        where = f"trajectory[{n}]"
        if not isinstance(step, dict):
            raise _fail(path, where, f"expected an object, got {_shown(step)}",
                        "each step is {\"action\": ..., \"observation\": ..., \"thought\": ...}")
        if not isinstance(step.get("action"), str):
            problem = "missing" if "action" not in step else f"expected a string, got {_shown(step['action'])}"
            raise _fail(path, f"{where}.action", problem, "the command the agent ran, as text")
        for name in ("observation", "thought", "response", "state"):
            if step.get(name) is not None and not isinstance(step[name], str):
                raise _fail(path, f"{where}.{name}", f"expected a string or null, got {_shown(step[name])}",
                            "MLGym stores it as text")
        seconds = finite_number(step.get("execution_time"))
        if step.get("execution_time") is not None and (seconds is None or seconds < 0):
            raise _fail(path, f"{where}.execution_time",
                        f"expected seconds >= 0, got {_shown(step['execution_time'])}", "a number or null")
    info = data.get("info", {})
    if not isinstance(info, dict):
        raise _fail(path, "info", f"expected an object, got {_shown(info)}",
                    "{\"model_stats\": {...}, \"exit_status\": \"...\", \"score\": [...]}")
    scores = info.get("score", [])
    if scores is None:
        scores = []
    if not isinstance(scores, list):
        raise _fail(path, "info.score", f"expected a list, got {_shown(scores)}",
                    "one {metric: value} object per validation and the submission last")
    for n, entry in enumerate(scores):
        if not isinstance(entry, dict):
            raise _fail(path, f"info.score[{n}]", f"expected an object, got {_shown(entry)}",
                        "{metric: value}")
    stats = info.get("model_stats", {})
    if stats is not None and not isinstance(stats, dict):
        raise _fail(path, "info.model_stats", f"expected an object, got {_shown(stats)}",
                    "{\"total_cost\": ..., \"tokens_sent\": ..., \"tokens_received\": ..., \"api_calls\": ...}")
    for name, value in (stats or {}).items():
        amount = finite_number(value)
        if name in ("total_cost", "task_cost", "tokens_sent", "tokens_received", "api_calls") and (
                amount is None or amount < 0):
            raise _fail(path, f"info.model_stats.{name}", f"expected a number >= 0, got {_shown(value)}",
                        "a count or a cost in USD")
    status = info.get("exit_status", "")
    if status is not None and not isinstance(status, str):
        raise _fail(path, "info.exit_status", f"expected a string, got {_shown(status)}",
                    "e.g. \"submitted\" or \"autosubmission (max_steps)\"")
    history = data.get("history", [])
    if history is not None and not isinstance(history, list):
        raise _fail(path, "history", f"expected a list, got {_shown(history)}",
                    "the messages: {\"role\": ..., \"content\": ...}")
    return data




def traj_commands(path: Path) -> list[tuple[str, str | None]]:
    """``(action text, thought)`` of each step of a ``.traj`` file, in order."""
    return [(step["action"], step.get("thought")) for step in read_traj(path)["trajectory"]]


__all__ = ["FORMAT_HINT", "TRAJ_SUFFIX", "TrajFormatError", "finite_number", "read_traj", "traj_commands"]

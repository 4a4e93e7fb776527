"""Checks of a run directory's records, for the commands that read many runs.

``rgym runs``, ``rgym view``, ``rgym analyze``, ``rgym export inspect`` and
``rgym score`` read folders of runs that other programs (or a scaffold, or a
disk) may have damaged.  One malformed value -- a token count that is a string,
a cost that is NaN or negative, a list where an object belongs, a line that is
not JSON in the middle of ``trajectory.jsonl``, a ``result.json`` that is not an
object -- must not stop them for the other runs: the run is listed as *broken*
with one line naming its folder, the file (and line) and the field.

:func:`record_problem` checks one trajectory record (cheap: readers call it on
every record they already read), :func:`result_problem` the figures of a result
that its converter lets through (NaN, infinities, negative counts), and
:func:`trajectory_problem` / :func:`run_problem` a whole run.  Each returns
``None`` when nothing is wrong, else the line to show.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rgym_core.records import EpisodeResult
from rgym_core.rundir import (
    RESULT_FILE,
    TRAJECTORY_FILE,
    RunDir,
    RunDirError,
    iter_numbered_records,
)

__all__ = ["BrokenRun", "broken_line", "record_problem", "result_problem", "run_problem",
           "trajectory_problem"]


class BrokenRun(ValueError):
    """A run whose records are malformed; ``str(err)`` is the line to show."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _count(value: Any) -> str | None:
    """A token or call count: a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"expected a non-negative integer, got {_shown(value)}"
    return None


def _amount(value: Any) -> str | None:
    """A cost, a duration or a time stamp: a finite number, not negative."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        return f"expected a finite number >= 0, got {_shown(value)}"
    return None


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"expected a string, got {_shown(value)}"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"expected true or false, got {_shown(value)}"


def _int(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {_shown(value)}"
    return None


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"expected an object, got {_shown(value)}"


def _list(value: Any) -> str | None:
    return None if isinstance(value, list) else f"expected a list, got {_shown(value)}"


def _score(value: Any) -> str | None:
    """A metric's value: a number (NaN is a grader's own "no value") or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number, got {_shown(value)}"
    return None


Check = Callable[[Any], "str | None"]


def _fields(obj: Any, where: str, checks: Mapping[str, Check], *, optional: bool = True,
            nullable: tuple[str, ...] = ()) -> str | None:
    """The first problem of ``obj``'s fields (``where.field: why``); absent fields
    pass when ``optional``, ``None`` passes for the names in ``nullable``."""
    if not isinstance(obj, dict):
        return f"{where}: expected an object, got {_shown(obj)}"
    for name, check in checks.items():
        if name not in obj:
            if optional:
                continue
            return f"{where}.{name}: missing"
        value = obj[name]
        if value is None and name in nullable:
            continue
        why = check(value)
        if why:
            return f"{where}.{name}: {why}"
    return None


_USAGE: dict[str, Check] = {"cost_usd": _amount, "input_tokens": _count, "output_tokens": _count, "calls": _count,
                            "retries": _count}
_CALL: dict[str, Check] = {"model": _text, "input_tokens": _count, "output_tokens": _count, "cost_usd": _amount,
         "latency_s": _amount, "prefix_messages": _count, "n_messages": _count, "messages": _list,
         "tool_calls": _list, "response": _text, "stop_reason": _text, "attempts": _count,
         "retries": _list}
_CALL_NULLABLE = ("model", "cost_usd", "latency_s", "response", "stop_reason", "messages", "tool_calls",
                  "prefix_messages")


def _calls(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list):
        return f"{where}: expected a list of objects, got {_shown(value)}"
    for n, call in enumerate(value):
        here = f"{where}[{n}]"
        problem = _fields(call, here, _CALL, nullable=_CALL_NULLABLE)
        if problem:
            return problem
        for key in ("messages", "tool_calls"):
            for k, item in enumerate(call.get(key) or []):
                if not isinstance(item, dict):
                    return f"{here}.{key}[{k}]: expected an object, got {_shown(item)}"
    return None


def _step(step: Any) -> str | None:
    problem = _fields(step, "step", {"index": _count, "started_at": _amount, "duration_s": _amount,
                                     "elapsed_s": _amount, "action": _object, "observation": _object},
                      nullable=("started_at", "duration_s", "elapsed_s"))
    if problem:
        return problem
    action = step.get("action")
    if action is not None:
        problem = _fields(action, "step.action", {"tool": _text, "args": _object, "thought": _text,
                                                  "raw": _text, "call_id": _text, "usage": _object},
                          nullable=("args", "thought", "raw", "call_id", "usage"))
        if problem:
            return problem
        if action.get("usage") is not None:
            problem = _fields(action["usage"], "step.action.usage", _USAGE)
            if problem:
                return problem
        problem = _calls(action.get("llm_calls"), "step.action.llm_calls")
        if problem:
            return problem
    obs = step.get("observation")
    if obs is not None:
        problem = _fields(obs, "step.observation", {"output": _text, "error": _flag, "exit_code": _int,
                                                    "truncated": _flag, "score": _object, "done": _flag,
                                                    "info": _object},
                          nullable=("output", "exit_code", "score", "info"))
        if problem:
            return problem
        for name, value in (obs.get("score") or {}).items():
            why = _score(value)
            if why:
                return f"step.observation.score[{name!r}]: {why}"
    return None


def _grading(score: Any) -> str | None:
    problem = _fields(score, "score", {"step": _int, "kind": _text, "valid": _flag, "scores": _object,
                                       "subtasks": _object, "error": _text, "duration_s": _amount,
                                       "details": _object},
                      nullable=("error", "duration_s", "details", "subtasks"))
    if problem:
        return problem
    for name, value in (score.get("scores") or {}).items():
        why = _score(value)
        if why:
            return f"score.scores[{name!r}]: {why}"
    for sub, values in (score.get("subtasks") or {}).items():
        if not isinstance(values, dict):
            return f"score.subtasks[{sub!r}]: expected an object, got {_shown(values)}"
        for name, value in values.items():
            why = _score(value)
            if why:
                return f"score.subtasks[{sub!r}][{name!r}]: {why}"
    return None


def record_problem(record: dict[str, Any]) -> str | None:
    """The first malformed field of one trajectory record (``field.path: why``),
    or ``None``.  Records of types it does not know pass."""
    kind = record.get("type")
    if kind == "step":
        return _step(record.get("step"))
    if kind == "score":
        return _grading(record.get("score"))
    if kind == "start":
        return _fields(record, "start", {"started_at": _amount, "tools": _list}, nullable=("started_at",))
    if kind == "agent_stop":
        if record.get("usage") is not None:
            problem = _fields(record["usage"], "agent_stop.usage", _USAGE)
            if problem:
                return problem
        return _calls(record.get("llm_calls"), "agent_stop.llm_calls")
    return None


def result_problem(result: EpisodeResult) -> str | None:
    """What a read result holds that no figure may be (``field: why``): NaN, an
    infinity or a negative cost, count or duration (its converter checked the types)."""
    for name, check in (("cost_usd", _amount), ("input_tokens", _count), ("output_tokens", _count),
                        ("steps", _count), ("duration_s", _amount), ("started_at", _amount),
                        ("ended_at", _amount)):
        why = check(getattr(result, name))
        if why:
            return f"{name}: {why}"
    return None


def broken_line(run: RunDir | Path | str, file: str, problem: str) -> str:
    """The one line naming a broken run: ``RUN_DIR: FILE: problem``."""
    path = run.path if isinstance(run, RunDir) else Path(run)
    return f"{path}: {file}: {problem}"


def trajectory_problem(run: RunDir) -> str | None:
    """The first problem of ``run``'s trajectory, as :func:`broken_line` (a missing
    trajectory, and a last line torn by a hard kill, are not problems)."""
    if not run.trajectory_path.exists():
        return None
    try:
        for line, record in iter_numbered_records(run.trajectory_path):
            problem = record_problem(record)
            if problem:
                return broken_line(run, f"{TRAJECTORY_FILE} line {line}", problem)
    except RunDirError as exc:
        return _rundir_line(run, exc)
    return None


def result_line(run: RunDir) -> str | None:
    """The problem of ``run``'s ``result.json`` (unreadable, or figures no result has),
    as :func:`broken_line`; ``None`` when it is fine or absent."""
    if not run.result_path.exists():
        return None
    try:
        result = run.result()
    except RunDirError as exc:
        return _rundir_line(run, exc)
    problem = result_problem(result)
    return broken_line(run, RESULT_FILE, problem) if problem else None


def run_problem(run: RunDir) -> str | None:
    """The first problem of ``run``'s result or trajectory (see the module docstring)."""
    return result_line(run) or trajectory_problem(run)


def _rundir_line(run: RunDir, exc: RunDirError) -> str:
    """A :class:`RunDirError` as ``RUN_DIR: FILE...: why`` (its message names the file)."""
    text = str(exc)
    prefix = str(run.path) + "/"
    return text if text.startswith(prefix) else f"{run.path}: {text}"

"""Run directories as the viewer's data: a list of run summaries and, per run, a
compact trajectory.

Everything is read through :mod:`rgym_core.rundir` (and the summaries through
:func:`rgym_core.runs.summarize`).  A trajectory becomes a mapping with
short keys, one entry per step::

    {"i": 12, "t": "bash", "a": {"command": "..."}, "th": "thought", "o": "output",
     "e": 1, "x": 2, "d": 0.31, "el": 133.2, "c": 0.0012, "ti": 1571, "to": 14,
     "m": [[model, in, out, cost, latency, stop, response(, retries)], ...], "rt": 2,
     "s": {...validation}}

(``retries``, only for a call that needed them: ``[[attempt, status, error, wait_s],
...]``, one per failed attempt; ``rt``: their number in the step.)

A step that changed a file through the editor has ``"df": [{"path", "diff"}]`` (the
unified diff the tool recorded); a validate step whose snapshot differs from the
previous one has ``"ws"``, and the trajectory ``"workspace"``: the final workspace
against the task's starter files (both comparisons of :mod:`rgym_view.diffs`).  A
run row carries ``curve``, its primary metric's valid gradings as ``[[step, score],
...]``, for the list page's plots.

plus the gradings, the run's events (agent stop, errors), the first prompt the
model saw (once, not per step), the result and the integrity summary.
Observations longer than ``max_output_chars`` are cut in the middle with a
note; the full text stays in ``trajectory.jsonl`` (its line number is kept).

A run whose records are malformed (:mod:`rgym_core.runcheck`) is *broken*: its
row and its trajectory carry ``problem``, one line naming the run folder, the file
and the field; its trajectory holds the steps before the bad record, and the
other runs load as usual.  The model calls shown are the action's ``llm_calls``:
with ``--agent-isolation process`` the runner's own records of the calls it made.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rgym_core import (
    RESULT_FILE,
    TRAJECTORY_FILE,
    EpisodeResult,
    RunDir,
    RunDirError,
    RunSummary,
    broken_line,
    iter_numbered_records,
    record_problem,
    result_problem,
    safe_summary,
)
from rgym_view.runs import iter_runs, parallel_map

#: Observations longer than this many characters are cut in the middle.
MAX_OUTPUT_CHARS = 200_000
#: Model responses and thoughts longer than this are cut too.
MAX_TEXT_CHARS = 50_000

EVENT_TYPES = ("agent_stop", "error", "hook_error", "grading_interrupted", "archive_error",
               "cleanup_error", "repaired")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _cut(text: Any, limit: int, line: int | None = None) -> str | None:
    if text is None:
        return None
    text = str(text)
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3:]
    where = f" (trajectory.jsonl line {line} has it whole)" if line else ""
    return f"{head}\n[... rgym view cut {len(text) - len(head) - len(tail):,} characters here{where} ...]\n{tail}"


def _fround(value: Any, digits: int) -> float | None:
    """``value`` rounded when it is a finite number (not a bool), else ``None`` (one
    call per field: this runs for every step of every run)."""
    kind = type(value)
    if kind is float:
        return round(value, digits) if math.isfinite(value) else None
    if kind is int:
        return float(value)
    return None


def _step_entry(step: dict[str, Any], line: int, max_output: int) -> dict[str, Any]:
    action = step.get("action") or {}
    obs = step.get("observation") or {}
    usage = action.get("usage") or {}
    entry: dict[str, Any] = {"i": int(step.get("index") or 0), "t": str(action.get("tool") or "?"),
                             "a": action.get("args") or {}, "ln": line}
    if action.get("thought"):
        entry["th"] = _cut(action["thought"], MAX_TEXT_CHARS)
    entry["o"] = _cut(obs.get("output") or "", max_output, line)
    if obs.get("error"):
        entry["e"] = 1
    if obs.get("exit_code") is not None:
        entry["x"] = obs.get("exit_code")
    if obs.get("truncated"):
        entry["tr"] = 1
    info = obs.get("info") or {}
    if info.get("timed_out"):
        entry["to_"] = 1
    if info.get("applied") is False or (info.get("lint_errors") and obs.get("error")):
        entry["rj"] = 1  # the editor refused the change
    entry["d"] = _fround(step.get("duration_s"), 3)
    entry["el"] = _fround(step.get("elapsed_s"), 3)
    cost = _fround(usage.get("cost_usd"), 8)
    if cost:
        entry["c"] = cost
    if usage.get("input_tokens"):
        entry["ti"] = int(usage["input_tokens"])
    if usage.get("output_tokens"):
        entry["to"] = int(usage["output_tokens"])
    calls = []
    raw = action.get("raw")
    for call in action.get("llm_calls") or []:
        if not isinstance(call, dict):
            continue
        response = call.get("response")
        if call.get("tool_calls"):
            response = (response or "") + ("\n" if response else "") + "\n".join(
                f"[tool call] {json.dumps(tc, ensure_ascii=False)}" for tc in call["tool_calls"])
        row = [call.get("model"), int(call.get("input_tokens") or 0),
               int(call.get("output_tokens") or 0), _fround(call.get("cost_usd"), 8),
               _fround(call.get("latency_s"), 3), call.get("stop_reason"),
               _cut(response, MAX_TEXT_CHARS)]
        retries = _retries(call.get("retries"))
        if retries:
            row.append(retries)
            entry["rt"] = entry.get("rt", 0) + len(retries)
        calls.append(row)
    if calls:
        entry["m"] = calls
    elif raw:
        entry["r"] = _cut(raw, MAX_TEXT_CHARS)
    if obs.get("score"):
        entry["sc"] = obs["score"]
    edit = _edit_diff(entry["t"], entry["a"], info, bool(obs.get("error")))
    if edit:
        entry["df"] = edit
    return entry


def _edit_diff(tool: str, args: Any, info: dict[str, Any], error: bool) -> list[dict[str, Any]]:
    """The file change a step made, as the viewer's ``df`` (``[{"path", "diff"}]``):
    the unified diff the editor recorded (``info.diff``), or for ``create`` the new
    file's text from its arguments (older runs recorded no diff)."""
    from rgym_view.diffs import MAX_DIFF_CHARS, unified

    if isinstance(info.get("diff"), str) and info.get("applied") is not False:
        return [{"path": str(info.get("path") or ""), "diff": _cut(info["diff"], MAX_DIFF_CHARS) or ""}]
    if tool == "create" and not error and isinstance(args, dict) and isinstance(args.get("path"), str):
        content = args.get("content")
        text = content if isinstance(content, str) else ""
        return [{"path": args["path"], "diff": unified("", text[:MAX_DIFF_CHARS * 2], args["path"]),
                 "new": True}]
    return []


def _retries(value: Any) -> list[list[Any]]:
    """A call's failed attempts that were retried, as ``[attempt, status, error, wait_s]``."""
    if not isinstance(value, list):
        return []
    return [[r.get("attempt"), r.get("status"), str(r.get("error") or "error"), _fround(r.get("wait_s"), 3)]
            for r in value if isinstance(r, dict)]


def _first_prompt(step: dict[str, Any]) -> list[dict[str, str]]:
    for call in (step.get("action") or {}).get("llm_calls") or []:
        if isinstance(call, dict) and call.get("messages"):
            return [{"role": str(m.get("role")), "content": _cut(m.get("content"), MAX_TEXT_CHARS) or ""}
                    for m in call["messages"] if isinstance(m, dict)]
    return []


def read_result(run: RunDir) -> tuple[EpisodeResult | None, str | None]:
    """``(result, problem)``: the run's result (``None`` without one) and why it
    cannot be read or holds figures no result has (NaN, negative counts), if so."""
    if not run.result_path.is_file():
        return None, None
    try:
        result = run.result()
    except RunDirError as exc:
        return None, str(exc)
    why = result_problem(result)
    if why:
        return None, broken_line(run, RESULT_FILE, why)
    return result, None


def trajectory(run: RunDir, *, max_output_chars: int = MAX_OUTPUT_CHARS,
               result: tuple[EpisodeResult | None, str | None] | None = None,
               summary: RunSummary | None = None, with_diffs: bool = True) -> dict[str, Any]:
    """One run's trajectory as the viewer's compact data (see the module's docstring);
    ``result``: what :func:`read_result` gave, when the caller has it already.  With
    ``summary``, the same pass over the records also analyses the run (``rgym
    analyze``'s failure modes, under ``"analysis"``)."""
    from rgym_view.analysis import FactsCollector

    facts = FactsCollector() if summary is not None else None
    steps: list[dict[str, Any]] = []
    gradings: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    prompt: list[dict[str, str]] = []
    start: dict[str, Any] = {}
    problem = None
    try:
        for line, record in iter_numbered_records(run.trajectory_path):
            bad = record_problem(record)
            if bad is not None:
                problem = broken_line(run, f"{TRAJECTORY_FILE} line {line}", bad)
                break
            if facts is not None:
                facts.add(record)
            kind = record.get("type")
            if kind == "step":
                step = record.get("step") or {}
                if not prompt:
                    prompt = _first_prompt(step)
                steps.append(_step_entry(step, line, max_output_chars))
            elif kind == "score":
                s = record.get("score") or {}
                gradings.append({"step": s.get("step"), "kind": s.get("kind"), "valid": bool(s.get("valid")),
                                 "scores": s.get("scores") or {}, "subtasks": s.get("subtasks") or {},
                                 "error": s.get("error"), "duration_s": _num(s.get("duration_s")),
                                 "confined": s.get("confined"),
                                 "snapshot_sha": (s.get("snapshot") or {}).get("sha256")
                                 if isinstance(s.get("snapshot"), dict) else None})
            elif kind == "start":
                start = {k: record.get(k) for k in ("started_at", "tools", "sandbox", "pid")}
            elif kind in EVENT_TYPES:
                events.append({k: (_cut(v, 4000) if isinstance(v, str) else v)
                               for k, v in record.items()})
    except RunDirError as exc:
        problem = str(exc)
    by_step = {}
    for g in gradings:
        if g["kind"] == "validate" and isinstance(g.get("step"), int):
            by_step[g["step"]] = g
    for entry in steps:
        graded = by_step.get(entry["i"])
        if graded is not None:
            entry["v"] = {"valid": graded["valid"], "scores": graded["scores"], "error": graded["error"]}
    final: dict[str, Any] | None = None
    r, unreadable = result if result is not None else read_result(run)
    problem = problem or unreadable
    if r is not None:
        final = {"status": str(r.status), "end_reason": str(r.end_reason or ""),
                 "why": r.end_reason.describe if r.end_reason else "",
                 "final_scores": r.final_scores, "error": r.error, "agent_error": r.agent_error,
                 "metrics": dict(r.metrics), "baseline_scores": dict(r.baseline_scores),
                 "reference_scores": dict(r.reference_scores), "sandbox": r.sandbox}
    budget: dict[str, Any] = {}
    config: dict[str, Any] = {}
    try:
        config = run.config()
        budget = config["budget"] if isinstance(config.get("budget"), dict) else {}
    except RunDirError:
        pass
    workspace = None
    if with_diffs:
        workspace, by_snapshot = _workspace_diffs(run, config, gradings)
        for entry in steps:
            if entry["i"] in by_snapshot:
                entry["ws"] = by_snapshot[entry["i"]]
    analysis = None
    if facts is not None and summary is not None and problem is None:
        done = facts.analysis(summary, budget)
        analysis = {"findings": done.findings, "flagged": done.flagged, "actions": done.actions,
                    "long_run": done.long_run}
    return {"steps": steps, "gradings": gradings, "events": events, "prompt": prompt, "start": start,
            "result": final, "budget": budget, "problem": problem, "analysis": analysis,
            "workspace": workspace}


def _workspace_diffs(run: RunDir, config: dict[str, Any], gradings: list[dict[str, Any]]
                     ) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]]]:
    """The final workspace against the starter files, and per validate step what its
    snapshot changed (see :mod:`rgym_view.diffs`); a failure is one line, not a crash."""
    from rgym_view import diffs

    try:
        final = diffs.final_workspace_diff(run.path, config)
        _, _, starter, _ = diffs.starter_of(config)
        return final, diffs.snapshot_diffs(run.path, gradings, starter)
    except Exception as exc:  # noqa: BLE001 - hostile archives: this run's diff only is lost
        return ({"against": "", "files": [], "same": 0,
                 "error": f"{run.path}: workspace diff failed: {type(exc).__name__}: {str(exc)[:300]}"}, {})


#: A run row's score curve holds at most this many points (the list page's plot).
MAX_CURVE_POINTS = 200


def score_curve(gradings: list[dict[str, Any]], metric: Any) -> list[list[float]]:
    """``[[step, score], ...]`` of a run's valid gradings of its primary metric, in
    order (thinned to :data:`MAX_CURVE_POINTS`, the last kept)."""
    if not isinstance(metric, str):
        return []
    points = [[float(g["step"]), v] for g in gradings
              if g.get("valid") and isinstance(g.get("step"), int)
              and (v := _num((g.get("scores") or {}).get(metric))) is not None]
    if len(points) > MAX_CURVE_POINTS:
        stride = -(-len(points) // MAX_CURVE_POINTS)
        points = points[:-1:stride] + [points[-1]]
    return points


def summary_row(s: RunSummary, index: int, base: Path | None) -> dict[str, Any]:
    """A run list row: the summary's fields the viewer shows."""
    path = Path(s.path)
    if base is not None:
        try:
            path = path.resolve().relative_to(base.resolve())
        except ValueError:
            pass
    data = s.to_dict()
    data["id"] = index
    data["path"] = str(path)
    data["task_label"] = s.task_label
    return data


def _load_one(job: tuple[int, Path], *, base: Path | None, with_steps: bool, max_output_chars: int,
              encode: Callable[[dict[str, Any]], Any] | None, with_diffs: bool = True
              ) -> tuple[dict[str, Any], Any]:
    index, path = job
    run = RunDir(path)
    try:
        result = read_result(run)
        summary = safe_summary(run, result=result[0])
        row = summary_row(summary, index, base)
        if not with_steps:
            return row, None
        traj = trajectory(run, max_output_chars=max_output_chars, result=result, summary=summary,
                          with_diffs=with_diffs)
        found = (traj.get("analysis") or {}).get("findings") or []
        # the run list shows (and filters on) the failure modes that flag a run
        row["modes"] = sorted({f["kind"] for f in found if f.get("severity") == "warning"})
        row["curve"] = score_curve(traj.get("gradings") or [], row.get("primary_metric"))
        row["problem"] = row.get("problem") or traj.get("problem")
    except Exception as exc:  # noqa: BLE001 - a bug the checks missed: this run only is broken
        line = f"{path}: cannot be read: {type(exc).__name__}: {str(exc)[:300]}"
        row = summary_row(RunSummary(path=str(path), state="corrupt", error=line, problem=line), index, base)
        traj = {"steps": [], "gradings": [], "events": [], "prompt": [], "start": {}, "result": None,
                "budget": {}, "problem": line, "analysis": None}
        if not with_steps:
            return row, None
    return row, encode(traj) if encode is not None else traj


def load(paths: Iterable[Path | str], *, with_steps: bool = True, max_output_chars: int = MAX_OUTPUT_CHARS,
         encode: Callable[[dict[str, Any]], Any] | None = None,
         with_diffs: bool = True) -> tuple[list[dict[str, Any]], list[Any]]:
    """``(run rows, trajectories)`` of every run under ``paths`` (trajectories ``None``
    when ``with_steps`` is False; ``encode(trajectory)`` when ``encode`` is given, run
    in the worker processes when there are many runs)."""
    targets = [Path(p) for p in paths]
    base = targets[0] if len(targets) == 1 and targets[0].is_dir() else None
    jobs = [(index, run.path) for index, run in enumerate(iter_runs(targets))]
    one = functools.partial(_load_one, base=base, with_steps=with_steps, max_output_chars=max_output_chars,
                            encode=encode, with_diffs=with_diffs)
    done = parallel_map(one, jobs)
    return [row for row, _ in done], [traj for _, traj in done]

"""``rgym export inspect``: run directories as Inspect AI ``.eval`` logs.

One run becomes one log holding one sample (epoch 1), written as the zip that
Inspect's ``read_eval_log`` reads and ``inspect view`` shows: ``header.json``
(the eval: task, solver = the agent, model, status, results, usage),
``samples/1_epoch_1.json`` and ``summaries.json``.  This module writes the
format itself (standard library only): ``inspect-ai`` is needed to read the
logs, not to write them.  How rgym's records map:

* sample ``messages``: the task message (system and user, from the model's
  first prompt, or the task description), then per step an assistant message
  (the thought; one tool call: the step's tool and arguments) and a tool
  message (the observation; an error when the tool failed or timed out).
* sample ``events``: per model call a ``model`` event (the conversation as the
  model saw it, pooled in ``events_data`` and referenced by ``input_refs``;
  the response, tokens, cost and latency), per step a ``tool`` event (timing,
  result, error), per grading a ``score`` event (validations are intermediate;
  the final grading is not).
* sample ``scores["rgym"]``: the final grading's scores (every metric), with the
  exit status as explanation; the eval's ``results`` carry each metric.
* usage: ``model_usage`` per model (tokens and cost), in the sample and the stats.
* a budget that ran out becomes the sample's ``limit``; an agent or rgym error
  its ``error``.

The model events and usage come from the actions' ``llm_calls`` and the
result's totals: with ``--agent-isolation process`` those are the runner's own
records of the calls it made for the scaffold, never the scaffold's claims.  A
broken run (a malformed field, :mod:`rgym_core.runcheck`) gets no log: it is
reported, by one line naming its folder, the file and the field, and the other
runs are exported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rgym_core.runcheck import run_problem
from rgym_core.rundir import RunDir, RunDirError, RunState
from rgym_core.serialization import unstructure
from rgym_view.data import iter_runs

log = logging.getLogger(__name__)

LOG_VERSION = 2
SCORER = "rgym"
_LIMITS = {"max_steps": ("message", "max_steps"), "time": ("time", "time_limit_s"),
           "cost": ("cost", "cost_limit_usd"), "tokens": ("token", "token_limit")}
_STOP = {"stop": "stop", "end_turn": "stop", "tool_calls": "tool_calls", "tool_use": "tool_calls",
         "length": "max_tokens", "max_tokens": "max_tokens", "content_filter": "content_filter"}


def _iso(ts: float | None) -> str | None:
    if not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts <= 0:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat()


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _uuid(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _usage(input_tokens: int, output_tokens: int, cost: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens),
                           "total_tokens": int(input_tokens) + int(output_tokens)}
    if cost:
        out["total_cost"] = float(cost)
    return out


def _scalar_scores(scores: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in (scores or {}).items() if _finite(v) is not None}


def _message(role: str, content: str, **extra: Any) -> dict[str, Any]:
    msg = {"role": role, "content": content, **extra}
    msg["id"] = _uuid(role, content, *sorted(extra.items(), key=lambda kv: kv[0]))
    return msg


def _range_refs(indices: list[int]) -> list[list[int]]:
    refs: list[list[int]] = []
    for i in indices:
        if refs and refs[-1][1] == i:
            refs[-1][1] = i + 1
        else:
            refs.append([i, i + 1])
    return refs


def _integrity(run: Any, result: Any) -> dict[str, Any] | None:
    """The integrity monitor's verdict and findings for the log's metadata: the run's
    ``integrity.json`` when it is there, else the summary in ``result.json``."""
    path = Path(run.path) / "integrity.json"
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    summary = result.extras.get("integrity") if result is not None else None
    return summary if isinstance(summary, dict) else None


def _limit(result: Any, budget: dict[str, Any]) -> dict[str, Any] | None:
    reason = str(result.end_reason) if result is not None and result.end_reason else None
    if reason not in _LIMITS:
        return None
    kind, key = _LIMITS[reason]
    value = _finite(budget.get(key)) if isinstance(budget, dict) else None
    return {"type": kind, "limit": value if value is not None else 0.0,
            "reason": result.end_reason.describe}


def run_to_log(run: RunDir) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(header, sample)``: the log's header and its one sample, as JSON data."""
    state = run.state()
    result = run.result() if state is RunState.COMPLETE else None
    config: dict[str, Any] = {}
    try:
        config = run.config()
    except RunDirError:
        pass
    ident = run.identity()
    task_cfg: dict[str, Any] = config["task"] if isinstance(config.get("task"), dict) else {}
    budget: dict[str, Any] = config["budget"] if isinstance(config.get("budget"), dict) else {}
    run_id = str(ident.get("run_id") or run.path.name)
    task = str(ident.get("task") or "?")
    agent = str(ident.get("agent") or "?")
    model = str(ident.get("model") or f"none/{agent.split('/')[-1]}")
    records = list(run.records())
    start = next((r for r in records if r.get("type") == "start"), {})
    started_at = _finite(start.get("started_at")) or (result.started_at if result else None)

    messages: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    pool: list[dict[str, Any]] = []
    prev_refs: list[int] = []
    model_usage: dict[str, dict[str, Any]] = {}
    first_prompt_done = False
    last_output: dict[str, Any] | None = None
    step_count = 0

    def clock(ts: float | None) -> tuple[str, float]:
        ts = ts if ts is not None else (started_at or 0.0)
        return _iso(ts) or _iso(started_at) or "1970-01-01T00:00:00+00:00", max(0.0, ts - (started_at or ts))

    description = str(task_cfg.get("description") or task)
    events.append({"event": "sample_init", **dict(zip(("timestamp", "working_start"), clock(started_at), strict=True)),
                   "sample": {"id": 1, "input": description, "target": "",
                              "metadata": {"rgym_run_id": run_id}},
                   "state": {}})
    for record in records:
        kind = record.get("type")
        if kind == "step":
            step = record.get("step") or {}
            step_count += 1
            action = step.get("action") or {}
            obs = step.get("observation") or {}
            index = int(step.get("index") or step_count)
            t0 = _finite(step.get("started_at"))
            duration = _finite(step.get("duration_s")) or 0.0
            calls = [c for c in action.get("llm_calls") or [] if isinstance(c, dict)]
            for n, call in enumerate(calls):
                new = [m for m in call.get("messages") or [] if isinstance(m, dict)]
                keep = int(call.get("prefix_messages") or 0)
                refs = prev_refs[:keep]
                for m in new:
                    pool.append(_message(str(m.get("role") or "user"), str(m.get("content") or "")))
                    refs.append(len(pool) - 1)
                if not first_prompt_done and new:
                    for m in new:
                        if m.get("role") in ("system", "user"):
                            messages.append(_message(str(m["role"]), str(m.get("content") or ""),
                                                     source="input"))
                        else:
                            break
                    first_prompt_done = True
                response = str(call.get("response") or "")
                in_tok, out_tok = int(call.get("input_tokens") or 0), int(call.get("output_tokens") or 0)
                cost = _finite(call.get("cost_usd"))
                latency = _finite(call.get("latency_s")) or 0.0
                call_model = str(call.get("model") or model)
                if model.endswith("/" + call_model):  # the provider's name for the run's model
                    call_model = model
                out_msg = _message("assistant", response, source="generate", model=call_model)
                tool_calls = [tc for tc in call.get("tool_calls") or [] if isinstance(tc, dict)]
                if tool_calls:
                    out_msg["tool_calls"] = [{"id": str(tc.get("id") or f"call-{index}-{j}"),
                                              "function": str(tc.get("name") or tc.get("function") or "?"),
                                              "arguments": tc.get("arguments") if isinstance(tc.get("arguments"), dict) else {},
                                              "type": "function"} for j, tc in enumerate(tool_calls)]
                usage = _usage(in_tok, out_tok, cost)
                output = {"model": call_model, "choices": [{"message": out_msg,
                                                            "stop_reason": _STOP.get(str(call.get("stop_reason")), "unknown")}],
                          "completion": response, "usage": usage, "time": latency}
                last_output = output
                ts, ws = clock(t0)
                events.append({"event": "model", "timestamp": ts, "working_start": ws, "model": call_model,
                               "input": [], "input_refs": _range_refs(refs), "tools": [], "tool_choice": "auto",
                               "config": {}, "output": output, "working_time": latency,
                               "metadata": {"rgym_step": index, "requery": call.get("requery", n)}})
                total = model_usage.setdefault(call_model, _usage(0, 0, None))
                total["input_tokens"] += in_tok
                total["output_tokens"] += out_tok
                total["total_tokens"] += in_tok + out_tok
                if cost:
                    total["total_cost"] = total.get("total_cost", 0.0) + cost
                prev_refs = refs
            if not calls:  # an agent without a model: its usage is the action's
                usage_rec = action.get("usage") or {}
                if usage_rec.get("input_tokens") or usage_rec.get("output_tokens"):
                    total = model_usage.setdefault(model, _usage(0, 0, None))
                    total["input_tokens"] += int(usage_rec.get("input_tokens") or 0)
                    total["output_tokens"] += int(usage_rec.get("output_tokens") or 0)
                    total["total_tokens"] = total["input_tokens"] + total["output_tokens"]
            call_id = str(action.get("call_id") or f"rgym-step-{index}")
            tool = str(action.get("tool") or "?")
            args = action.get("args") if isinstance(action.get("args"), dict) else {}
            thought = action.get("thought") or ""
            messages.append(_message("assistant", str(thought), source="generate", model=model,
                                     tool_calls=[{"id": call_id, "function": tool, "arguments": args,
                                                  "type": "function"}],
                                     metadata={"rgym_step": index}))
            info = obs.get("info") or {}
            error = None
            if info.get("timed_out"):
                error = {"type": "timeout", "message": str(obs.get("output") or "")[-2000:] or "timed out"}
            elif obs.get("error"):
                error = {"type": "unknown", "message": str(obs.get("output") or "")[:2000] or "error"}
            output_text = str(obs.get("output") or "")
            tool_msg = _message("tool", output_text, tool_call_id=call_id, function=tool,
                                metadata={"rgym_step": index, "exit_code": obs.get("exit_code"),
                                          "truncated": bool(obs.get("truncated"))})
            if error:
                tool_msg["error"] = error
            messages.append(tool_msg)
            ts, ws = clock(t0)
            done_ts = _iso((t0 or started_at or 0.0) + duration) if (t0 or started_at) else None
            tool_event: dict[str, Any] = {"event": "tool", "type": "function", "timestamp": ts, "working_start": ws,
                                          "id": call_id, "function": tool, "arguments": args,
                                          "result": output_text, "working_time": duration, "events": [],
                                          "metadata": {"rgym_step": index, "exit_code": obs.get("exit_code")}}
            if done_ts:
                tool_event["completed"] = done_ts
            if error:
                tool_event["error"] = error
                tool_event["failed"] = True
            events.append(tool_event)
        elif kind == "score":
            s = record.get("score") or {}
            grading_kind = str(s.get("kind") or "")
            value: Any = _scalar_scores(s.get("scores") or {}) if s.get("valid") else "invalid"
            ts, ws = clock(None)
            events.append({"event": "score", "timestamp": ts, "working_start": ws,
                           "score": {"value": value, "explanation": s.get("error") or grading_kind,
                                     "metadata": {"kind": grading_kind, "step": s.get("step"),
                                                  "valid": bool(s.get("valid")),
                                                  "subtasks": s.get("subtasks") or {}}},
                           "intermediate": grading_kind == "validate", "scorer": SCORER})

    if not messages or messages[0]["role"] not in ("system", "user"):
        messages.insert(0, _message("user", description, source="input"))

    # the final score: the result's, else the last final grading of the trajectory
    final: dict[str, float] | None = None
    explanation = str(result.status) if result else str(state)
    if result is not None and result.final_scores is not None:
        final = _scalar_scores(result.final_scores)
    else:
        finals = [e for e in events if e["event"] == "score" and not e["intermediate"]]
        if finals and isinstance(finals[-1]["score"]["value"], dict):
            final = finals[-1]["score"]["value"]
    if result is not None and result.error:
        explanation += f": {result.error}"
    primary = result.primary_metric if result is not None else None
    score = {"value": final if final is not None else "invalid", "explanation": explanation,
             "answer": None,
             "metadata": {"status": str(result.status) if result else str(state),
                          "primary_metric": primary,
                          "baseline_scores": dict(result.baseline_scores) if result else {},
                          "reference_scores": dict(result.reference_scores) if result else {}}}
    if result is not None and len(model_usage) <= 1 and (result.input_tokens or result.output_tokens):
        # the result's totals are the runner's own count (it includes calls an agent made outside steps)
        name = next(iter(model_usage), model)
        model_usage[name] = _usage(result.input_tokens, result.output_tokens, result.cost_usd or None)
    ended = result.ended_at if result else None
    total_time = result.duration_s if result else None
    error = None
    if result is not None and (result.agent_error or result.status.infrastructure and result.error):
        message = result.agent_error or result.error or ""
        error = {"message": message, "traceback": message, "traceback_ansi": message}
    output = last_output or {"model": model, "choices": [], "completion": ""}
    input_text = next((m["content"] for m in messages if m["role"] == "user"), description)
    sample: dict[str, Any] = {
        "id": 1, "epoch": 1, "input": input_text, "target": "",
        "messages": messages, "output": output, "scores": {SCORER: score},
        "metadata": {"rgym_run_dir": str(run.path), "rgym_run_id": run_id, "task": task, "agent": agent,
                     "status": explanation.split(":")[0], "end_reason": str(result.end_reason or "") if result else "",
                     "steps": step_count, "tags": dict(result.tags) if result else {}},
        "store": {}, "events": events, "model_usage": model_usage, "role_usage": {},
        "started_at": _iso(started_at), "completed_at": _iso(ended), "total_time": total_time,
        "working_time": total_time, "uuid": _uuid("sample", run_id), "attachments": {},
        "events_data": {"messages": pool, "calls": []}, "turn_count": step_count,
    }
    limit = _limit(result, budget)
    if limit:
        sample["limit"] = limit
    if error:
        sample["error"] = error

    if result is None:
        status = "started" if state is RunState.RUNNING else "error"
    elif str(result.status) == "cancelled":
        status = "cancelled"
    elif result.status.infrastructure:
        status = "error"
    else:
        status = "success"
    created = _iso(started_at) or datetime.now(UTC).isoformat()
    metrics = {}
    if final:
        for name, value in final.items():
            metrics[name] = {"name": name, "value": value, "params": {}}
    run_cfg: dict[str, Any] = config["run"] if isinstance(config.get("run"), dict) else {}
    header: dict[str, Any] = {
        "version": LOG_VERSION, "status": status,
        "eval": {"eval_id": _uuid("eval", run_id), "run_id": run_id, "created": created, "task": task,
                 # One log per run: a task_id shared by runs of a task makes Inspect's viewer
                 # take every earlier run for a retry of the newest and hide it.
                 "task_id": _uuid("task", task, ident.get("profile"), run_id), "task_version": 0,
                 "task_display_name": task + (f"@{ident['profile']}" if ident.get("profile") else ""),
                 "task_description": description[:2000],
                 "task_attribs": {}, "task_args": {"profile": ident.get("profile")} if ident.get("profile") else {},
                 "solver": agent, "solver_args": dict(run_cfg.get("agent_options") or {}),
                 "tags": [f"{k}={v}" for k, v in sorted((result.tags if result else {}).items())],
                 "dataset": {"name": task, "samples": 1, "sample_ids": [1], "shuffled": False},
                 "model": model, "model_generate_config": {}, "model_base_url": run_cfg.get("base_url"),
                 "model_args": {}, "config": {"epochs": 1},
                 "packages": {"rgym-core": str(config.get("rgym_version") or "")},
                 "metadata": {"rgym": {"run_dir": str(run.path), "seed": ident.get("seed"),
                                       "sandbox": result.sandbox if result else None,
                                       "primary_metric": primary,
                                       "direction": str(result.direction) if result else None,
                                       "budget": budget,
                                       "integrity": _integrity(run, result),
                                       "snapshots": [unstructure(s.snapshot) for s in
                                                     (result.scores if result else [])
                                                     if s.snapshot is not None]}}},
        "plan": {"name": "plan", "steps": [{"solver": agent, "params": dict(run_cfg.get("agent_options") or {})}],
                 "config": {}},
        "stats": {"started_at": _iso(started_at) or "", "completed_at": _iso(ended) or "",
                  "model_usage": model_usage},
        "invalidated": False, "tags": [], "metadata": {},
    }
    if status != "started":
        header["results"] = {"total_samples": 1, "completed_samples": 1 if result is not None else 0,
                             "scores": [{"name": SCORER, "scorer": SCORER, "params": {},
                                         "scored_samples": 1 if final else 0,
                                         "unscored_samples": 0 if final else 1,
                                         "metrics": metrics}]}
    if error and status == "error":
        header["error"] = error
    return header, sample


def _summary(sample: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage", "role_usage",
            "started_at", "completed_at", "total_time", "working_time", "uuid", "turn_count")
    out: dict[str, Any] = {k: sample.get(k) for k in keys if k in sample}
    text = out.get("input")
    out["input"] = text[:1000] if isinstance(text, str) else ""
    out["error"] = (sample.get("error") or {}).get("message")
    out["limit"] = (sample.get("limit") or {}).get("type")
    out["completed"] = True
    out["message_count"] = len(sample.get("messages") or [])
    return out


def write_log(run: RunDir, dest: Path) -> Path:
    """Write the ``.eval`` log of ``run`` to the file ``dest`` (replaced atomically)."""
    header, sample = run_to_log(run)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("_journal/start.json", dump({"version": header["version"], "eval": header["eval"],
                                                  "plan": header["plan"]}))
        zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", dump(sample))
        zf.writestr("summaries.json", dump([_summary(sample)]))
        zf.writestr("header.json", dump(header))
    tmp.replace(dest)
    return dest


def log_name(run: RunDir) -> str:
    """``<created>_<task>_<run id>.eval`` (Inspect's naming: time, task, id)."""
    ident = run.identity()
    start = run.start_record()
    ts = _finite(start.get("started_at"))
    stamp = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H-%M-%S+00-00") if ts else "unknown"
    task = str(ident.get("task") or "task").replace("/", "-")
    if ident.get("profile"):
        task += f"-{ident['profile']}"
    return f"{stamp}_{task}_{ident.get('run_id') or run.path.name}.eval"


def export_runs(paths: Iterable[Path | str], out_dir: Path | str, *,
                broken: list[str] | None = None) -> list[tuple[Path, Path]]:
    """Write one ``.eval`` log per run under ``paths`` into ``out_dir``; returns
    ``(run dir, log)`` pairs.  A broken run is left out and its line appended to
    ``broken`` (logged as a warning when ``broken`` is not given)."""
    out_dir = Path(out_dir)
    written = []
    for run in iter_runs([Path(p) for p in paths]):
        problem = run_problem(run)
        if problem is None:
            try:
                written.append((run.path, write_log(run, out_dir / log_name(run))))
                continue
            except Exception as exc:  # noqa: BLE001 - a case the checks missed: this run only
                problem = f"{run.path}: cannot be exported: {type(exc).__name__}: {str(exc)[:300]}"
        if broken is not None:
            broken.append(problem)
        else:
            log.warning("rgym: broken run not exported: %s", problem)
    return written

"""``rgym export inspect``: run directories as Inspect AI ``.eval`` logs, built from
Inspect's own log classes (``EvalLog``, ``EvalSpec``, ``EvalSample``, ``EvalResults``,
its messages and events) and written by its ``write_eval_log``.  ``inspect-ai`` is an
optional dependency (``pip install 'rgym-view[inspect]'``); without it the command says
so in one line.  The plugin's README has the whole mapping; in short:

* one log per *cell* (the runs of one task and profile, one agent with its options, one
  model), each run one epoch of its one sample in seed order, so ``results`` hold each
  metric's ``mean`` and ``stderr`` over the seeds (Inspect's own metrics); a seed met
  again opens the cell's next log.  ``task_id`` hashes the cell and its runs, so no log
  passes for a retry of another in Inspect's viewer.
* ``eval.task`` is ``rgym/<whole task name>``: ``evals_df`` drops the first namespace and
  keeps ``mlgym/prisoners-dilemma``.
* per step an assistant message with one tool call and a tool message; per model call a
  ``model`` event (the conversation, the tool definitions sent, the generation settings,
  ``retries``); per grading a ``score`` event; the final score ``rgym`` with the grader's
  details, and the integrity findings of a flagged run in its explanation; the sample's
  metadata holds ``integrity.json``, the failure modes, the archived workspace's files.

Model events and usage come from the actions' ``llm_calls`` and the result's totals
(with ``--agent-isolation process``, the runner's own records, never the scaffold's
claims).  A broken run (:mod:`rgym_core.runcheck`) gets no epoch: it is reported by one
line naming its folder, the file and the field, and the other runs are exported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import tarfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import define

from rgym_core import RunDir, RunDirError, RunState, run_problem, unstructure
from rgym_view.runs import iter_runs

logger = logging.getLogger(__name__)

SCORER = "rgym"
INSTALL_HINT = "rgym export inspect needs inspect-ai: pip install 'rgym-view[inspect]'"
_LIMITS: dict[str, tuple[Any, str]] = {"max_steps": ("message", "max_steps"), "time": ("time", "time_limit_s"),
           "cost": ("cost", "cost_limit_usd"), "tokens": ("token", "token_limit")}
_STOP: dict[str, Any] = {"stop": "stop", "end_turn": "stop", "tool_calls": "tool_calls", "tool_use": "tool_calls",
         "length": "max_tokens", "max_tokens": "max_tokens", "content_filter": "content_filter"}
_GENERATION = {"max_tokens": int, "temperature": float, "top_p": float}
_WORKSPACE_FILES = 500


class InspectMissing(RuntimeError):
    """``inspect-ai`` is not installed; the message says how to install it."""


def require_inspect() -> None:
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise InspectMissing(INSTALL_HINT) from None


def _dt(ts: float | None) -> datetime | None:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts <= 0:
        return None
    return datetime.fromtimestamp(ts, UTC)


def _iso(ts: float | None) -> str | None:
    moment = _dt(ts)
    return moment.isoformat() if moment else None


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _uuid(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _scalar_scores(scores: dict[str, Any] | None) -> dict[str, float]:
    return {str(k): float(v) for k, v in (scores or {}).items() if _finite(v) is not None}


def _add(totals: dict[str, dict[str, float]], model: str, tin: int, tout: int, cost: float | None) -> None:
    total = totals.setdefault(model, {"input_tokens": 0, "output_tokens": 0, "total_cost": 0.0})
    total["input_tokens"] += tin
    total["output_tokens"] += tout
    total["total_cost"] += cost or 0.0


def _usage(totals: dict[str, dict[str, float]]) -> dict[str, Any]:
    from inspect_ai.model import ModelUsage

    return {m: ModelUsage(input_tokens=int(t["input_tokens"]), output_tokens=int(t["output_tokens"]),
                          total_tokens=int(t["input_tokens"] + t["output_tokens"]),
                          total_cost=t["total_cost"] or None) for m, t in totals.items()}


def _generation(options: dict[str, Any]) -> Any:
    """Inspect's ``GenerateConfig`` of the generation settings the run's agent was given."""
    from inspect_ai.model import GenerateConfig

    settings = {}
    for key, kind in _GENERATION.items():
        try:
            if options.get(key) is not None:
                settings[key] = kind(options[key])
        except (TypeError, ValueError):
            pass
    return GenerateConfig(**settings)


def _tools(defs: list[Any]) -> list[Any]:
    """Inspect's ``ToolInfo`` of each tool definition (OpenAI or Anthropic form) sent to the model."""
    from inspect_ai.tool import ToolInfo, ToolParams

    out = []
    for d in defs:
        fn = d.get("function", d) if isinstance(d, dict) else {}
        try:
            params = ToolParams.model_validate(fn.get("parameters") or fn.get("input_schema") or {})
            out.append(ToolInfo(name=str(fn["name"]), description=str(fn.get("description") or ""),
                                parameters=params))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _integrity(run: RunDir, result: Any) -> dict[str, Any] | None:
    """The integrity monitor's report: the run's ``integrity.json`` when it is there,
    else the summary in ``result.json``."""
    try:
        data = json.loads((Path(run.path) / "integrity.json").read_text())
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    summary = result.extras.get("integrity") if result is not None else None
    return summary if isinstance(summary, dict) else None


def _integrity_note(report: dict[str, Any] | None) -> str:
    if not report or not (report.get("flagged") or report.get("review")):
        return ""
    findings = [f for f in report.get("findings") or [] if isinstance(f, dict)]
    said = "; ".join(f"{f.get('kind')}: {str(f.get('message') or '')[:200]}" for f in findings[:3])
    more = f" (+{len(findings) - 3} more)" if len(findings) > 3 else ""
    verdict = "flagged" if report.get("flagged") else "up for review"
    return f"; integrity {verdict}: {said or ', '.join(map(str, report.get('kinds') or []))}{more}"


def _failure_modes(run: RunDir) -> list[dict[str, Any]]:
    from rgym_view.analysis import analyze_run

    try:
        return list(analyze_run(run).findings)
    except Exception as exc:  # noqa: BLE001 - the analysis is extra: the log is written without it
        return [{"kind": "analysis_failed", "message": f"{type(exc).__name__}: {str(exc)[:200]}"}]


def _workspace(run: RunDir) -> dict[str, Any] | None:
    """The archived workspace's files and sizes (``workspace.tar.gz``), when there is one."""
    path = Path(run.path) / "workspace.tar.gz"
    if not path.is_file():
        return None
    try:
        with tarfile.open(path) as tar:
            files = [(m.name.removeprefix("workspace/"), m.size) for m in tar.getmembers() if m.isfile()]
    except (OSError, tarfile.TarError) as exc:
        return {"archive": path.name, "error": f"{type(exc).__name__}: {exc}"}
    return {"archive": path.name, "archive_bytes": path.stat().st_size, "files": len(files),
            "bytes": sum(size for _, size in files),
            "listing": [{"name": n, "size": s} for n, s in files[:_WORKSPACE_FILES]]}


def _limit(result: Any, budget: dict[str, Any]) -> Any:
    from inspect_ai.log import EvalSampleLimit

    reason = str(result.end_reason) if result is not None and result.end_reason else None
    if reason not in _LIMITS:
        return None
    kind, key = _LIMITS[reason]
    value = _finite(budget.get(key))
    return EvalSampleLimit(type=kind, limit=value if value is not None else 0.0, reason=result.end_reason.describe)


def _metric(metric: Any, scores: list[Any]) -> float:
    """An Inspect metric (``mean()``, ``stderr()``) over the epochs' scores."""
    return float(metric(scores))


@define
class Epoch:
    """One run, as one epoch of its cell's sample."""

    run: RunDir
    key: tuple[str, ...]
    seed: Any
    started_at: float | None
    ended_at: float | None
    status: str
    sample: Any
    final: dict[str, float] | None
    usage: dict[str, dict[str, float]]
    error: Any
    meta: dict[str, Any]


def run_epoch(run: RunDir) -> Epoch:
    """The run's sample (epoch 1 until its cell numbers it) and what its log's header needs."""
    import inspect_ai.event as ie
    import inspect_ai.model as im
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall, ToolCallError

    chat = {"system": im.ChatMessageSystem, "user": im.ChatMessageUser, "assistant": im.ChatMessageAssistant,
            "tool": im.ChatMessageTool}
    state = run.state()
    result = run.result() if state is RunState.COMPLETE else None
    config: dict[str, Any] = {}
    try:
        config = run.config()
    except RunDirError:
        pass
    ident = run.identity()
    task_cfg = config["task"] if isinstance(config.get("task"), dict) else {}
    budget = config["budget"] if isinstance(config.get("budget"), dict) else {}
    run_cfg = config["run"] if isinstance(config.get("run"), dict) else {}
    options = dict(run_cfg.get("agent_options") or {}) if isinstance(run_cfg.get("agent_options"), dict) else {}
    run_id = str(ident.get("run_id") or run.path.name)
    task = str(ident.get("task") or "?")
    agent = str(ident.get("agent") or "?")
    model = str(ident.get("model") or f"none/{agent.split('/')[-1]}")
    gen = _generation(options)
    records = list(run.records())
    start: dict[str, Any] = next((r for r in records if r.get("type") == "start"), {})
    started_at = _finite(start.get("started_at")) or (result.started_at if result else None)

    def clock(ts: float | None) -> dict[str, Any]:
        ts = ts if ts is not None else (started_at or 0.0)
        return {"timestamp": _dt(ts) or _dt(started_at) or datetime.fromtimestamp(0, UTC),
                "working_start": max(0.0, ts - (started_at or ts))}

    description = str(task_cfg.get("description") or task)
    messages: list[Any] = []
    events: list[Any] = [ie.SampleInitEvent(**clock(started_at), state={},
                                         sample=Sample(id=1, input=description, metadata={"rgym_run_id": run_id}))]
    usage: dict[str, dict[str, float]] = {}
    tools_seen: dict[str, list[Any]] = {}
    prev_input: list[Any] = []
    last_output: Any = None
    retried: list[dict[str, Any]] = []
    steps = 0
    for record in records:
        if record.get("type") == "step":
            step = record.get("step") or {}
            steps += 1
            action, obs = step.get("action") or {}, step.get("observation") or {}
            index = int(step.get("index") or steps)
            t0 = _finite(step.get("started_at"))
            calls = [c for c in action.get("llm_calls") or [] if isinstance(c, dict)]
            for n, call in enumerate(calls):
                new = [chat.get(str(m.get("role")), im.ChatMessageUser)(content=str(m.get("content") or ""))
                       for m in call.get("messages") or [] if isinstance(m, dict)]
                model_input = prev_input[:int(call.get("prefix_messages") or 0)] + new
                if not messages:
                    for m in new:
                        if m.role not in ("system", "user"):
                            break
                        messages.append(m.model_copy(update={"source": "input"}))
                call_model = str(call.get("model") or model)
                if model.endswith("/" + call_model):  # the provider's name for the run's model
                    call_model = model
                tin, tout = int(call.get("input_tokens") or 0), int(call.get("output_tokens") or 0)
                cost, latency = _finite(call.get("cost_usd")), _finite(call.get("latency_s")) or 0.0
                tool_calls = [ToolCall(id=str(tc.get("id") or f"call-{index}-{j}"), type="function",
                                       function=str(tc.get("name") or tc.get("function") or "?"),
                                       arguments=tc["arguments"] if isinstance(tc.get("arguments"), dict) else {})
                              for j, tc in enumerate(call.get("tool_calls") or []) if isinstance(tc, dict)]
                reply = im.ChatMessageAssistant(content=str(call.get("response") or ""), source="generate",
                                             model=call_model, tool_calls=tool_calls or None)
                last_output = im.ModelOutput(model=call_model, time=latency, usage=im.ModelUsage(
                    input_tokens=tin, output_tokens=tout, total_tokens=tin + tout, total_cost=cost or None),
                    choices=[im.ChatCompletionChoice(message=reply, stop_reason=_STOP.get(
                        str(call.get("stop_reason")), "unknown"))])
                if isinstance(call.get("tools"), list):
                    tools_seen[str(call.get("tools_sha256"))] = _tools(call["tools"])
                tools = tools_seen.get(str(call.get("tools_sha256")), []) if call.get("tools_sha256") else []
                failed = [r for r in call.get("retries") or [] if isinstance(r, dict)]
                retried += [{"step": index, **r} for r in failed]
                events.append(ie.ModelEvent(
                    **clock(t0), model=call_model, input=model_input, tools=tools, tool_choice="auto",
                    config=_generation({**options, **{k: call[k] for k in _GENERATION if k in call}}),
                    output=last_output, working_time=latency, retries=len(failed) or None,
                    metadata={"rgym_step": index, "requery": call.get("requery", n),
                              "attempts": call.get("attempts", 1), "failed_attempts": failed}))
                _add(usage, call_model, tin, tout, cost)
                prev_input = model_input
            if not calls:  # an agent without a model: its usage is the action's
                spent = action.get("usage") or {}
                if spent.get("input_tokens") or spent.get("output_tokens"):
                    _add(usage, model, int(spent.get("input_tokens") or 0), int(spent.get("output_tokens") or 0),
                         None)
            call_id = str(action.get("call_id") or f"rgym-step-{index}")
            tool = str(action.get("tool") or "?")
            args = action["args"] if isinstance(action.get("args"), dict) else {}
            messages.append(im.ChatMessageAssistant(
                content=str(action.get("thought") or ""), source="generate", model=model, metadata={"rgym_step": index},
                tool_calls=[ToolCall(id=call_id, function=tool, arguments=args, type="function")]))
            output = str(obs.get("output") or "")
            error: ToolCallError | None = None
            if (obs.get("info") or {}).get("timed_out"):
                error = ToolCallError("timeout", output[-2000:] or "timed out")
            elif obs.get("error"):
                error = ToolCallError("unknown", output[:2000] or "error")
            messages.append(im.ChatMessageTool(content=output, tool_call_id=call_id, function=tool, error=error,
                                            metadata={"rgym_step": index, "exit_code": obs.get("exit_code"),
                                                      "truncated": bool(obs.get("truncated"))}))
            duration = _finite(step.get("duration_s")) or 0.0
            events.append(ie.ToolEvent(**clock(t0), id=call_id, function=tool, arguments=args, result=output,
                                    error=error, failed=True if error else None, working_time=duration,
                                    completed=_dt((t0 or started_at or 0.0) + duration),
                                    metadata={"rgym_step": index, "exit_code": obs.get("exit_code")}))
        elif record.get("type") == "score":
            s = record.get("score") or {}
            kind = str(s.get("kind") or "")
            events.append(ie.ScoreEvent(**clock(None), scorer=SCORER, intermediate=kind == "validate", score=Score(
                value=_scalar_scores(s.get("scores")) if s.get("valid") else "invalid",
                explanation=s.get("error") or kind,
                metadata={"kind": kind, "step": s.get("step"), "valid": bool(s.get("valid")),
                          "subtasks": s.get("subtasks") or {}, "details": s.get("details") or {}})))

    if not messages or messages[0].role not in ("system", "user"):
        messages.insert(0, im.ChatMessageUser(content=description, source="input"))
    # the final score: the result's, else the last final grading of the trajectory
    final: dict[str, float] | None = None
    explanation = str(result.status) if result else str(state)
    finals = [e for e in events if e.event == "score" and not e.intermediate]
    if result is not None and result.final_scores is not None:
        final = _scalar_scores(result.final_scores)
    elif finals and isinstance(finals[-1].score.value, dict):
        final = dict(finals[-1].score.value)
    if result is not None and result.error:
        explanation += f": {result.error}"
    integrity = _integrity(run, result)
    gradings = [g for g in (result.scores if result else []) if g.kind != "validate"]
    details = dict(gradings[-1].details or {}) if gradings and getattr(gradings[-1], "details", None) else (
        finals[-1].score.metadata.get("details", {}) if finals else {})
    score = Score(value=final if final is not None else "invalid", explanation=explanation + _integrity_note(integrity),
                  metadata={"status": str(result.status) if result else str(state),
                            "primary_metric": result.primary_metric if result else None,
                            "direction": str(result.direction) if result else None, "details": details,
                            "baseline_scores": dict(result.baseline_scores) if result else {},
                            "reference_scores": dict(result.reference_scores) if result else {},
                            "integrity_flagged": bool(integrity and integrity.get("flagged"))})
    if result is not None and len(usage) <= 1 and (result.input_tokens or result.output_tokens):
        # the result's totals are the runner's own count (it includes calls an agent made outside steps)
        usage = {next(iter(usage), model): {"input_tokens": result.input_tokens,
                                            "output_tokens": result.output_tokens,
                                            "total_cost": result.cost_usd or 0.0}}
    failure: EvalError | None = None
    if result is not None and (result.agent_error or result.status.infrastructure and result.error):
        message = result.agent_error or result.error or ""
        failure = EvalError(message=message, traceback=message, traceback_ansi=message)
    if result is None:
        status = "started" if state is RunState.RUNNING else "error"
    elif str(result.status) == "cancelled":
        status = "cancelled"
    else:
        status = "error" if result.status.infrastructure else "success"
    seed = ident.get("seed", run_cfg.get("seed"))
    sample = EvalSample(
        id=1, epoch=1, input=next((m.text for m in messages if m.role == "user"), description), target="",
        messages=messages, output=last_output or im.ModelOutput(model=model), scores={SCORER: score},
        metadata={"rgym_run_dir": str(run.path), "rgym_run_id": run_id, "task": task, "agent": agent,
                  "seed": seed, "status": explanation.split(":")[0],
                  "end_reason": str(result.end_reason or "") if result else "", "steps": steps,
                  "tags": dict(result.tags) if result else {}, "integrity": integrity,
                  "failure_modes": _failure_modes(run), "workspace": _workspace(run),
                  "model_retries": int(getattr(result, "model_retries", 0) or 0) if result else len(retried),
                  "retried_attempts": retried},
        events=events, model_usage=_usage(usage), started_at=_iso(started_at),
        completed_at=_iso(result.ended_at if result else None), total_time=result.duration_s if result else None,
        working_time=result.duration_s if result else None, uuid=_uuid("sample", run_id), turn_count=steps,
        limit=_limit(result, budget), error=failure)
    key = (task, str(ident.get("profile") or ""), agent, json.dumps(options, sort_keys=True, default=str), model)
    meta = {"run_id": run_id, "run_dir": str(run.path), "seed": seed, "profile": ident.get("profile"),
            "description": description, "options": options, "generation": gen, "budget": budget,
            "base_url": run_cfg.get("base_url"), "version": str(config.get("rgym_version") or ""),
            "sandbox": result.sandbox if result else None, "integrity_flagged": bool(integrity and integrity.get("flagged")),
            "snapshots": [unstructure(s.snapshot) for s in (result.scores if result else []) if s.snapshot]}
    return Epoch(run=run, key=key, seed=seed, started_at=started_at, ended_at=result.ended_at if result else None,
                 status=status, sample=sample, final=final, usage=usage, error=failure, meta=meta)


def cells(epochs: Iterable[Epoch]) -> list[list[Epoch]]:
    """The epochs of each log: one cell's runs in seed order (then start); a seed met
    again in a cell opens its next log."""
    by_key: dict[tuple[str, ...], list[list[Epoch]]] = {}
    for ep in sorted(epochs, key=lambda e: (e.started_at or 0.0, e.meta["run_id"])):
        logs = by_key.setdefault(ep.key, [])
        home = next((group for group in logs if all(e.seed != ep.seed for e in group)), None)
        if home is None:
            logs.append(home := [])
        home.append(ep)
    out = []
    for logs in by_key.values():
        for group in logs:
            group.sort(key=lambda e: (e.seed is None, e.seed if isinstance(e.seed, int) else 0, e.started_at or 0.0))
            out.append(group)
    return out


def cell_log(group: list[Epoch]) -> Any:
    """Inspect's ``EvalLog`` of one cell: one sample, one epoch per run."""
    import inspect_ai.log as il
    from inspect_ai.scorer import SampleScore, Score, mean, stderr

    first = group[0]
    task, profile, agent, _, model = first.key
    run_ids = [e.meta["run_id"] for e in group]
    samples = [il.condense_sample(e.sample.model_copy(update={"epoch": n})) for n, e in enumerate(group, start=1)]
    totals: dict[str, dict[str, float]] = {}
    for e in group:
        for name, u in e.usage.items():
            _add(totals, name, int(u["input_tokens"]), int(u["output_tokens"]), u["total_cost"])
    statuses = {e.status for e in group}
    status: Any = next((s for s in ("started", "error", "cancelled") if s in statuses), "success")
    primary = first.sample.scores[SCORER].metadata.get("primary_metric")
    names = sorted({k for e in group for k in (e.final or {})}, key=lambda k: (k != primary, k))
    scores = []
    for name in names:
        got = [SampleScore(score=Score(value=v), sample_id=1) for e in group if (v := (e.final or {}).get(name)) is not None]
        scores.append(il.EvalScore(name=name, scorer=SCORER, reducer="mean", scored_samples=len(got),
                                unscored_samples=len(group) - len(got),
                                metadata={"over": f"{len(got)} epoch(s): the seeds of the cell"},
                                metrics={"mean": il.EvalMetric(name="mean", value=_metric(mean(), got)),
                                         "stderr": il.EvalMetric(name="stderr", value=_metric(stderr(), got))}))
    means = {s.name: s.metrics["mean"].value for s in scores}
    scores = scores or [il.EvalScore(name=SCORER, scorer=SCORER, scored_samples=0, unscored_samples=len(group))]
    budget = first.meta["budget"]
    started = min((e.started_at for e in group if e.started_at), default=None)
    ended = max((e.ended_at for e in group if e.ended_at), default=None)
    spec = il.EvalSpec(
        eval_id=_uuid("eval", *run_ids), run_id=_uuid("run", *run_ids), created=_iso(started) or
        datetime.now(UTC).isoformat(), task=f"rgym/{task}", task_id=_uuid("task", *first.key, *run_ids),
        task_version=0, task_display_name=task + (f"@{profile}" if profile else ""),
        task_description=first.meta["description"][:2000], task_args={"profile": profile} if profile else {},
        solver=agent, solver_args=first.meta["options"], model=model, model_generate_config=first.meta["generation"],
        model_base_url=first.meta["base_url"],
        tags=sorted({f"{k}={v}" for e in group for k, v in (e.sample.metadata.get("tags") or {}).items()}),
        dataset=il.EvalDataset(name=task, samples=1, sample_ids=[1], shuffled=False),
        config=il.EvalConfig(epochs=len(group), epochs_reducer=["mean"],
                          time_limit=int(budget["time_limit_s"]) if _finite(budget.get("time_limit_s")) else None,
                          token_limit=budget.get("token_limit") if isinstance(budget.get("token_limit"), int) else None,
                          cost_limit=_finite(budget.get("cost_limit_usd"))),
        packages={"rgym-core": first.meta["version"]},
        metadata={"rgym": {"runs": [{"epoch": n, **{k: e.meta[k] for k in (
            "run_id", "run_dir", "seed", "sandbox", "integrity_flagged", "snapshots")}}
            for n, e in enumerate(group, start=1)], "primary_metric": primary, "budget": budget}})
    eval_log = il.EvalLog(
        version=2, status=status, eval=spec, samples=samples,
        plan=il.EvalPlan(name="plan", steps=[il.EvalPlanStep(solver=agent, params=first.meta["options"])]),
        results=None if status == "started" else il.EvalResults(
            total_samples=1, completed_samples=1 if any(e.status != "started" for e in group) else 0, scores=scores),
        stats=il.EvalStats(started_at=_iso(started) or "", completed_at=_iso(ended) or "", model_usage=_usage(totals)),
        error=next((e.error for e in group if e.error), None) if status == "error" else None)
    if means:  # set after: EvalLog's validator migrates only the JSON form of reductions
        eval_log.reductions = [il.EvalSampleReductions(scorer=SCORER, reducer="mean",
                                                    samples=[il.EvalSampleScore(value=means, sample_id=1)])]
    return eval_log


def log_name(group: list[Epoch]) -> str:
    """``<created>_<task>_<id>.eval`` (Inspect's naming: time, task, id): the run's id
    for a log of one run, else a hash of the cell's runs."""
    start = min((e.started_at for e in group if e.started_at), default=None)
    stamp = _dt(start).strftime("%Y-%m-%dT%H-%M-%S+00-00") if start else "unknown"  # type: ignore[union-attr]
    task, profile = group[0].key[0].replace("/", "-"), group[0].key[1]
    ident = group[0].meta["run_id"] if len(group) == 1 else _uuid(*(e.meta["run_id"] for e in group))[:12]
    return f"{stamp}_{task}{'-' + profile if profile else ''}_{ident}.eval"


def write_log(group: list[Epoch], dest: Path) -> Path:
    """Write the cell's ``.eval`` log to ``dest`` with Inspect's ``write_eval_log`` (replaced atomically)."""
    from inspect_ai.log import write_eval_log

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    write_eval_log(cell_log(group), str(tmp), format="eval")
    tmp.replace(dest)
    return dest


def export_runs(paths: Iterable[Path | str], out_dir: Path | str, *,
                broken: list[str] | None = None) -> list[tuple[Path, Path, int]]:
    """Write one ``.eval`` log per cell of the runs under ``paths`` into ``out_dir``;
    returns ``(run dir, log, epoch)`` per run.  A broken run is left out and its line
    appended to ``broken`` (logged as a warning when ``broken`` is not given).
    :class:`InspectMissing` when ``inspect-ai`` is not installed."""
    require_inspect()
    out_dir = Path(out_dir)
    problems: list[str] = []
    epochs = []
    for run in iter_runs([Path(p) for p in paths]):
        problem = run_problem(run)
        if problem is None:
            try:
                epochs.append(run_epoch(run))
                continue
            except Exception as exc:  # noqa: BLE001 - a case the checks missed: this run only
                problem = f"{run.path}: cannot be exported: {type(exc).__name__}: {str(exc)[:300]}"
        problems.append(problem)
    written = []
    for group in cells(epochs):
        try:
            dest = write_log(group, out_dir / log_name(group))
        except Exception as exc:  # noqa: BLE001 - this cell only
            problems += [f"{e.run.path}: cannot be exported: {type(exc).__name__}: {str(exc)[:300]}" for e in group]
            continue
        written += [(e.run.path, dest, n) for n, e in enumerate(group, start=1)]
    for problem in problems:
        if broken is not None:
            broken.append(problem)
        else:
            logger.warning("rgym: broken run not exported: %s", problem)
    return written

"""Run summaries: the facts of one run directory in one row.

A run directory's summary (:class:`RunSummary`, built by :func:`summarize`) is the
row that ``rgym runs`` prints, that ``rgym show RUN_DIR`` expands and that the
run viewer (``rgym view``, plugin ``rgym-view``) lists: identity, state, exit
status, the primary score against the baseline, cost, tokens, steps,
duration and the integrity monitor's summary.  It works on runs that are still
going or were killed (no ``result.json``): their figures come from the
trajectory.  A run whose records are malformed (a string token count, a NaN cost,
a list where an object belongs, garbage in the middle of the trajectory) is
*broken*: its summary's ``problem`` is one line naming the run folder, the file
and the field (:mod:`rgym_core.runcheck`), and the other runs are listed as usual.
Run directories are read through :mod:`rgym_core.rundir` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from attrs import asdict, define, field

from rgym_core.direction import better
from rgym_core.records import EpisodeResult
from rgym_core.runcheck import broken_line, record_problem, result_line, result_problem
from rgym_core.rundir import (
    RESULT_FILE,
    TRAJECTORY_FILE,
    RunDir,
    RunDirError,
    RunState,
    iter_numbered_records,
    iter_run_dirs,
)

__all__ = ["RunSummary", "iter_summaries", "safe_summary", "summarize"]


@define
class RunSummary:
    """One run directory at a glance (what ``rgym runs`` lists)."""

    path: str
    state: str
    task: str | None = None
    profile: str | None = None
    agent: str | None = None
    model: str | None = None
    seed: int | None = None
    run_id: str | None = None
    status: str | None = None
    end_reason: str | None = None
    primary_metric: str | None = None
    direction: str = "maximize"
    score: float | None = None
    baseline: float | None = None
    best_validation: float | None = None
    validations: int = 0
    steps: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    started_at: float | None = None
    duration_s: float | None = None
    error: str | None = None
    infrastructure: bool = False
    integrity: dict[str, Any] | None = None
    tags: dict[str, str] = field(factory=dict)
    #: Why the run is broken (one line naming its folder, file and field), or None.
    problem: str | None = None

    @property
    def solver(self) -> str:
        """``agent`` or ``agent (model)``."""
        agent = self.agent or "?"
        return f"{agent} ({self.model})" if self.model else agent

    @property
    def flagged(self) -> bool:
        return bool(self.integrity and self.integrity.get("flagged"))

    @property
    def task_label(self) -> str:
        return f"{self.task or '?'}@{self.profile}" if self.profile else (self.task or "?")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["solver"] = self.solver
        data["flagged"] = self.flagged
        return data


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _integrity(extras: dict[str, Any]) -> dict[str, Any] | None:
    raw = extras.get("integrity") if isinstance(extras, dict) else None
    if not isinstance(raw, dict):
        return None
    counts: dict[Any, Any] = raw["counts"] if isinstance(raw.get("counts"), dict) else {}
    kinds: list[Any] = raw["kinds"] if isinstance(raw.get("kinds"), list) else []
    findings: list[Any] = raw["findings"] if isinstance(raw.get("findings"), list) else []
    review_kinds: list[Any] = raw["review_kinds"] if isinstance(raw.get("review_kinds"), list) else []
    return {"flagged": bool(raw.get("flagged")), "review": bool(raw.get("review")),
            "review_kinds": [str(k) for k in review_kinds],
            "counts": {str(k): v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)},
            "kinds": [str(k) for k in kinds], "findings": [f for f in findings if isinstance(f, dict)]}


def summarize(run: RunDir | Path | str, *, result: EpisodeResult | None = None) -> RunSummary:
    """The summary of one run directory (complete, running, killed or corrupt);
    ``result``: its result when the caller has read it already."""
    run = run if isinstance(run, RunDir) else RunDir(Path(run))
    problem: str | None = None
    if result is not None:
        state = RunState.COMPLETE
    elif run.result_path.exists():  # read once (RunDir.state() would read it a second time)
        try:
            result = run.result()
            state = RunState.COMPLETE
        except RunDirError:
            state = RunState.CORRUPT
            problem = result_line(run)
    else:
        state = run.state()
    if result is not None:
        problem = _result_problem(run, result)
        if problem is not None:  # figures no result can have: none of them is shown
            result, state = None, RunState.CORRUPT
    out = RunSummary(path=str(run.path), state=str(state), problem=problem)
    if result is not None:
        r = result
        out.task, out.profile, out.agent, out.model = r.task_id, r.profile, r.agent, r.model
        out.seed, out.run_id, out.status = r.seed, r.run_id, str(r.status)
        out.end_reason = str(r.end_reason) if r.end_reason is not None else None
        out.primary_metric, out.direction = r.primary_metric, str(r.direction)
        out.score = _finite(r.primary_score)
        primary = r.primary_metric or ""
        out.baseline = _finite(r.baseline_scores.get(primary))
        vals = [_finite(s.scores.get(primary)) for s in r.scores if s.kind == "validate" and s.valid]
        out.validations = sum(1 for s in r.scores if s.kind == "validate")
        for v in vals:
            if v is not None and (out.best_validation is None or better(v, out.best_validation,
                                                                        r.direction)):
                out.best_validation = v
        out.steps, out.cost_usd = r.steps, r.cost_usd
        out.input_tokens, out.output_tokens = r.input_tokens, r.output_tokens
        out.started_at, out.duration_s = r.started_at or None, r.duration_s
        out.error = r.error or r.agent_error
        out.infrastructure = r.status.infrastructure
        out.integrity = _integrity(r.extras)
        out.tags = dict(r.tags)
        return out
    try:
        ident = run.identity()
    except RunDirError:
        ident = {}
    out.task, out.profile, out.agent = ident.get("task"), ident.get("profile"), ident.get("agent")
    out.model, out.seed, out.run_id = ident.get("model"), ident.get("seed"), ident.get("run_id")
    metric: str | None = None
    try:
        config = run.config()
        task: dict[str, Any] = config["task"] if isinstance(config.get("task"), dict) else {}
        for m in task.get("metrics") or []:
            if isinstance(m, dict) and m.get("primary"):
                metric = str(m.get("name") or "") or None
                out.direction = str(m.get("direction") or "maximize")
        out.primary_metric = metric
        baseline = task.get("baseline") or {}
        if isinstance(baseline, dict) and isinstance(baseline.get("scores"), dict) and metric:
            out.baseline = _finite(baseline["scores"].get(metric))
        tags = (config.get("run") or {}).get("tags") if isinstance(config.get("run"), dict) else None
        out.tags = {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}
    except RunDirError:
        pass
    if state is RunState.CORRUPT:
        out.error = "result.json cannot be read"
    try:
        for line, record in iter_numbered_records(run.trajectory_path):
            bad = record_problem(record)
            if bad is not None:
                out.problem = out.problem or broken_line(run, f"{TRAJECTORY_FILE} line {line}", bad)
                break
            kind = record.get("type")
            if kind == "start":
                out.started_at = _finite(record.get("started_at"))
            elif kind == "step":
                step = record.get("step") or {}
                out.steps = max(out.steps, int(step.get("index") or 0))
                usage = (step.get("action") or {}).get("usage") or {}
                out.cost_usd += _finite(usage.get("cost_usd")) or 0.0
                out.input_tokens += int(usage.get("input_tokens") or 0)
                out.output_tokens += int(usage.get("output_tokens") or 0)
                elapsed = _finite(step.get("elapsed_s"))
                if elapsed is not None:
                    out.duration_s = elapsed + (_finite(step.get("duration_s")) or 0.0)
            elif kind == "score":
                score = record.get("score") or {}
                if score.get("kind") == "validate":
                    out.validations += 1
                    v = _finite((score.get("scores") or {}).get(metric)) if metric else None
                    if v is not None and (out.best_validation is None or
                                          better(v, out.best_validation, out.direction)):  # type: ignore[arg-type]
                        out.best_validation = v
    except RunDirError as exc:
        out.error = str(exc)
        out.problem = out.problem or str(exc)
    return out


def _result_problem(run: RunDir, result: EpisodeResult) -> str | None:
    why = result_problem(result)
    return broken_line(run, RESULT_FILE, why) if why else None


def iter_summaries(paths: Iterable[Path | str]) -> Iterator[RunSummary]:
    """Summaries of every run directory under ``paths`` (run dirs, runs or sweep folders).
    A folder that cannot be read raises :class:`~rgym_core.rundir.RunDirError`."""
    seen: set[str] = set()
    for path in paths:
        for run in iter_run_dirs(path):
            key = str(run.path.resolve())
            if key in seen:
                continue
            seen.add(key)
            yield safe_summary(run)


def safe_summary(run: RunDir, *, result: EpisodeResult | None = None) -> RunSummary:
    """:func:`summarize`, and for a run it cannot read (a bug this module's checks
    missed) a ``corrupt`` summary whose ``problem`` says so: one run never stops a
    listing of many."""
    try:
        return summarize(run, result=result)
    except Exception as exc:  # noqa: BLE001 - one malformed run must not stop the others
        line = f"{run.path}: cannot be read: {type(exc).__name__}: {str(exc)[:300]}"
        return RunSummary(path=str(run.path), state=str(RunState.CORRUPT), error=line, problem=line)

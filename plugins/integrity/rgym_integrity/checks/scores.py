"""Implausible scores: beyond a metric's possible range, not a finite number, or
better than the reference (state of the art) by more than the task's margin.
Without a margin from the task, a score past the reference by more than the
reference's own gain over the baseline is a warning."""

from __future__ import annotations

import math
from typing import Any

from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.trace import EpisodeTrace


def _get(record: Any, name: str, default: Any = None) -> Any:
    return record.get(name, default) if isinstance(record, dict) else getattr(record, name, default)


def check(trace: EpisodeTrace) -> list[Finding]:
    policy = trace.policy
    findings: list[Finding] = []
    flagged: dict[tuple[str, str], Finding] = {}
    unconfined: list[int] = []
    for record in trace.scores:
        if not _get(record, "valid", False):
            continue
        step = int(_get(record, "step", 0))
        kind = str(_get(record, "kind", ""))
        if _get(record, "confined") is False:
            unconfined.append(step)
        values = dict(_get(record, "scores", {}) or {})
        for metric, value in values.items():
            problem = _problem(policy, metric, value)
            if problem is None:
                continue
            reason, severity, evidence = problem
            key = (metric, reason)
            if key in flagged:
                flagged[key].steps.append(step)
                continue
            finding = Finding(kind=Kind.IMPLAUSIBLE_SCORE, severity=severity, steps=[step],
                              message=f"{metric} = {value:.6g} ({kind} at step {step}) {reason}",
                              evidence={"metric": metric, "value": value, "grading": kind, **evidence})
            flagged[key] = finding
            findings.append(finding)
    if unconfined:
        findings.append(Finding(
            kind=Kind.IMPLAUSIBLE_SCORE, severity=Severity.WARNING, steps=sorted(set(unconfined)),
            message=("the grader ran the agent's code unconfined (no bubblewrap or separate user on this "
                     "machine): the scores are only as trustworthy as that code"),
            evidence={"confined": False}))
    return findings


def _problem(policy: Any, metric: str, value: Any) -> tuple[str, Severity, dict[str, Any]] | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "is not a number", Severity.ERROR, {}
    if not math.isfinite(value):
        return "is not a finite number", Severity.ERROR, {}
    low, high = policy.bounds.get(metric, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        return (f"is outside the metric's possible range [{_fmt(low)}, {_fmt(high)}]", Severity.ERROR,
                {"bounds": [low, high]})
    reference = policy.reference.get(metric)
    if reference is None:
        return None
    direction = policy.directions.get(metric, "maximize")
    beyond = value - reference if direction == "maximize" else reference - value
    if beyond <= 0:
        return None
    if metric in policy.sota_margins or policy.sota_margin is not None:
        margin = policy.sota_margins.get(metric)
        if margin is None:
            margin = policy.sota_margin * abs(reference)
        if beyond > margin:
            return (f"beats the reference score {reference:.6g} by {beyond:.6g}, more than the task's "
                    f"margin {margin:.6g}", Severity.ERROR, {"reference": reference, "margin": margin})
        return None
    baseline = policy.baseline.get(metric)
    if baseline is None:
        return None
    gain = abs(reference - baseline)
    if gain > 0 and beyond > gain:
        return (f"beats the reference score {reference:.6g} by {beyond:.6g}, more than the reference's "
                f"own gain over the baseline ({gain:.6g}); the task sets no margin",
                Severity.WARNING, {"reference": reference, "baseline": baseline})
    return None


def _fmt(value: float | None) -> str:
    return "-inf" if value is None else f"{value:g}"

"""Implausible scores, in the order they are tried (one finding per metric and rule):

* ``error``: not a finite number; past the metric's ceiling; outside the metric's
  possible range (the task's ``integrity.bounds``, or the default by the metric's
  name, with the ceiling as its better end); better than the reference score by
  more than the task's ``sota_margin``/``sota_margins``;
* for review (a ``warning`` with ``review``): **at the ceiling**, the best value
  the metric can take (:attr:`rgym_core.specs.Metric.ceiling`; within
  :data:`CEILING_TOLERANCE` relative): what copied test labels or a grader that
  was got round give; **far beyond the reference**, when the task sets no margin:
  with ``best`` the better of the task's reference and baseline scores and
  ``spread = |reference - baseline|``, a score past ``best`` by more than
  ``k * spread`` (``k``: the policy's ``review_factor``, default 1,
  ``RGYM_INTEGRITY_REVIEW_FACTOR``).  A task without both scores, or with equal
  ones, has no "far".

Grading without confinement is a ``warning`` too."""

from __future__ import annotations

import math
from typing import Any

from attrs import define

from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.trace import EpisodeTrace


def _get(record: Any, name: str, default: Any = None) -> Any:
    return record.get(name, default) if isinstance(record, dict) else getattr(record, name, default)


#: How close to the ceiling counts as at it, relative to ``max(1, |ceiling|)``.
CEILING_TOLERANCE = 1e-9


@define
class Problem:
    """What is wrong with one score: the rule (``bounds``, ``ceiling``, ``at_ceiling``,
    ``margin``, ``far``...), why, how much it weighs, and the evidence."""

    rule: str
    reason: str
    severity: Severity
    evidence: dict[str, Any]
    review: bool = False


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
            key = (metric, problem.rule)
            if key in flagged:
                flagged[key].steps.append(step)
                continue
            shown = f"{value:.6g}" if isinstance(value, int | float) else repr(value)
            finding = Finding(kind=Kind.IMPLAUSIBLE_SCORE, severity=problem.severity, steps=[step],
                              message=f"{metric} = {shown} ({kind} at step {step}) {problem.reason}",
                              evidence={"metric": metric, "value": value, "grading": kind, "rule": problem.rule,
                                        **problem.evidence},
                              review=problem.review)
            flagged[key] = finding
            findings.append(finding)
    if unconfined:
        findings.append(Finding(
            kind=Kind.IMPLAUSIBLE_SCORE, severity=Severity.WARNING, steps=sorted(set(unconfined)),
            message=("the grader ran the agent's code unconfined (no bubblewrap or separate user on this "
                     "machine): the scores are only as trustworthy as that code"),
            evidence={"confined": False}))
    return findings


def _problem(policy: Any, metric: str, value: Any) -> Problem | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return Problem("number", "is not a number", Severity.ERROR, {})
    if not math.isfinite(value):
        return Problem("finite", "is not a finite number", Severity.ERROR, {})
    direction = policy.directions.get(metric, "maximize")
    ceiling = policy.ceilings.get(metric)
    if ceiling is not None:
        past = _beyond(value, ceiling, direction)
        tolerance = CEILING_TOLERANCE * max(1.0, abs(ceiling))
        if past > tolerance:
            return Problem("ceiling", f"is past the metric's ceiling {ceiling:g}, the best value it can take",
                           Severity.ERROR, {"ceiling": ceiling})
        if past >= -tolerance:
            return Problem("at_ceiling", f"reaches the metric's ceiling {ceiling:g}, the best value it can take: "
                                         "copied test labels or a grader that was got round give that; "
                                         "look at the run before the score counts",
                           Severity.WARNING, {"ceiling": ceiling}, review=True)
    low, high = policy.bounds.get(metric, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        return Problem("bounds", f"is outside the metric's possible range [{_fmt(low)}, {_fmt(high, '+inf')}]",
                       Severity.ERROR, {"bounds": [low, high]})
    reference = policy.reference.get(metric)
    if reference is None:
        return None
    if metric in policy.sota_margins or policy.sota_margin is not None:
        beyond = _beyond(value, reference, direction)
        margin = policy.sota_margins.get(metric)
        if margin is None:
            margin = policy.sota_margin * abs(reference)
        if beyond > margin:
            return Problem("margin", f"beats the reference score {reference:.6g} by {beyond:.6g}, more than the "
                                     f"task's margin {margin:.6g}", Severity.ERROR,
                           {"reference": reference, "margin": margin})
        return None
    baseline = policy.baseline.get(metric)
    if baseline is None:
        return None
    spread = abs(reference - baseline)
    if spread == 0:
        return None
    best = reference if _beyond(reference, baseline, direction) >= 0 else baseline
    beyond = _beyond(value, best, direction)
    k = float(policy.review_factor)
    if beyond > k * spread:
        which = "reference" if best == reference else "baseline"
        return Problem("far", f"is far beyond the task's scores: {beyond:.6g} past its {which} {best:.6g}, more "
                              f"than {k:g} x the difference between its reference {reference:.6g} and baseline "
                              f"{baseline:.6g} ({spread:.6g}); the task sets no margin",
                       Severity.WARNING, {"reference": reference, "baseline": baseline, "best": best,
                                          "limit": best + (k * spread if direction != "minimize" else -k * spread),
                                          "review_factor": k},
                       review=True)
    return None


def _beyond(value: float, than: float, direction: str) -> float:
    """How much better ``value`` is than ``than`` (negative: worse)."""
    return value - than if direction != "minimize" else than - value


def _fmt(value: float | None, none: str = "-inf") -> str:
    return none if value is None else f"{value:g}"

"""The scorer ``rgym_inspect/rgym_scorer``: an rgym episode's final grading, as an
Inspect score.

For a sample solved inside Inspect (its ReAct agent, any solver using the ``rgym``
sandbox), the sandbox's episode submits and rgym's runner grades it as it grades
``rgym run`` (processes killed, the workspace frozen and archived, the machine's
grader secret, the confined grader, the integrity monitor).  For a sample an rgym
agent played (:func:`rgym_inspect.solvers.rgym_agent`), the score is the final
grading of that ``rgym run`` episode.  Both have a run directory.

The value is the task's primary metric (``0.0`` when there is none: the grader
failed or the episode ended without a valid grading; ``metadata["valid"]`` is then
``False`` and the explanation says why).  The metadata holds every metric, the metric
directions, the id of the grader secret, ``integrity`` (``flagged``, the findings'
kinds), ``end_reason``, ``status`` and ``run_dir``.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox, store

from rgym_core import unstructure
from rgym_inspect.sandbox import RgymSandboxEnvironment, load_task_spec
from rgym_inspect.solvers import RESULT_KEY


def _score(primary: str, direction: str, scores: dict[str, Any], valid: bool, error: str | None,
           metadata: dict[str, Any]) -> Score:
    metadata = {"valid": valid, "scores": dict(scores), "primary_metric": primary, "direction": direction,
                "error": error, **metadata}
    value = scores.get(primary) if valid else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return Score(value=0.0, explanation=f"rgym grader: no '{primary}' score ({error or 'not reported'})",
                     metadata={**metadata, "valid": False})
    explanation = f"rgym grader: {primary} = {value:g} ({direction})"
    integrity = metadata.get("integrity")
    if isinstance(integrity, dict) and integrity.get("flagged"):
        explanation += f"; integrity flagged: {', '.join(integrity.get('kinds') or [])}"
    return Score(value=float(value), explanation=explanation, metadata=metadata)


def _episode_score(result: dict[str, Any]) -> Score:
    spec = load_task_spec(str(result.get("task_id")), result.get("profile"))
    final = result.get("final_scores") or {}
    error = result.get("error")
    return _score(str(result.get("primary_metric") or spec.primary_metric.name),
                  str(result.get("direction") or spec.primary_metric.direction), final,
                  bool(final) and error is None, error,
                  {"task": spec.id, "metrics": result.get("metrics") or {},
                   "integrity": (result.get("extras") or {}).get("integrity"),
                   "end_reason": result.get("end_reason"), "status": result.get("status"),
                   "run_dir": result.get("run_dir"), "agent": result.get("agent"),
                   "grader_secret": next((s.get("grader_secret") for s in reversed(result.get("scores") or [])
                                          if isinstance(s, dict)), None)})


@scorer(metrics=[mean(), stderr()])
def rgym_scorer() -> Scorer:
    """Score the sample with its rgym episode's final grading: the ``rgym`` sandbox's
    episode submits (unless a budget ended it) and is graded by rgym's runner; an
    episode an rgym agent played (:func:`rgym_inspect.solvers.rgym_agent`) is read from
    the sample's store."""

    async def score(state: TaskState, target: Target) -> Score:
        result = store().get(RESULT_KEY)
        if not isinstance(result, dict):
            env = sandbox().as_type(RgymSandboxEnvironment)
            result = unstructure(await env.finish())
        return _episode_score(result)

    return score

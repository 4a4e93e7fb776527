"""Per-episode scores: the best attempt and the last submission.

An episode's *attempts* are the values of the task's primary metric over every
valid grading, in order (each ``validate``, then the submission or
autosubmission).  The best attempt is the best of them by the metric's
direction; the last submission is the final one.  As in MLGym, when the final
grading failed, the last valid ``validate`` stands in for it.  An episode with no
valid score has neither and counts as a failed run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import define, field

from rgym_core.direction import best
from rgym_core.specs import Direction


@define(frozen=True)
class SubtaskInfo:
    """A sub-task of a task, as scoring needs it (ResearchGym's sub-tasks)."""

    id: str
    metric: str | None = None
    direction: Direction = "maximize"
    baseline: float | None = None
    reference: float | None = None
    weight: float = 1.0
    primary: bool = False
    #: False: declared by the original, not graded by rgym (left out of the rates).
    graded: bool = True


@define(frozen=True)
class TaskInfo:
    """What scoring needs to know about a task: its primary metric and direction,
    the baseline's and the reference (SOTA) score, and its sub-tasks.

    ``baseline_tolerance`` is the baseline's measured noise (the task spec's
    baseline ``tolerances``/``tolerance``: the band within which ``rgym check-pack``
    calls a re-run a reproduction): a run improves on the baseline only when it
    beats it by more than this (``None``: by any margin)."""

    task: str
    metric: str | None = None
    direction: Direction = "maximize"
    baseline: float | None = None
    reference: float | None = None
    subtasks: tuple[SubtaskInfo, ...] = ()
    baseline_tolerance: float | None = None
    #: Which set ``baseline`` comes from: ``published`` (the original benchmark's
    #: figure), ``measured`` (rgym's), or ``None`` (no baseline).
    baseline_kind: str | None = None
    #: Where ``baseline`` comes from: the published figure's citation, or where rgym
    #: measured it.
    baseline_source: str = ""


@define
class Episode:
    """The scores of one run of one solver on one task.

    ``values`` are the primary metric's values of the valid gradings in order;
    ``subtasks`` the final value of each sub-task the run completed.
    ``infrastructure`` is True when rgym or the machine, not the agent, ended the
    run (``error``, ``autosubmitted_sandbox_error``, ``cancelled``, ``ungraded``):
    such runs are counted apart and left out of the scores unless asked for.
    """

    solver: str
    task: str
    run: str
    values: list[float] = field(factory=list)
    subtasks: dict[str, float] = field(factory=dict)
    status: str | None = None
    infrastructure: bool = False
    #: The integrity monitor flagged the run (an error finding, see ``rgym-integrity``).
    flagged: bool = False
    #: Set by a streaming reader that keeps only the best and the last value in
    #: ``values``: the number of valid gradings they summarise.
    attempts: int | None = None


@define(frozen=True)
class EpisodeScore:
    """The best attempt and the last submission of one episode."""

    solver: str
    task: str
    run: str
    best: float | None
    last: float | None
    attempts: int

    @property
    def failed(self) -> bool:
        """True when the episode has no valid score."""
        return self.best is None


def clean(values: Sequence[float | None]) -> list[float]:
    """The values that are real numbers (drops ``None`` and NaN)."""
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def best_of(values: Sequence[float], direction: Direction) -> float | None:
    """The best value by ``direction``, or ``None`` for no values."""
    return best(values, direction)


def score_episode(episode: Episode, direction: Direction) -> EpisodeScore:
    """The best attempt and last submission of ``episode``."""
    values = clean(episode.values)
    return EpisodeScore(solver=episode.solver, task=episode.task, run=episode.run,
                        best=best_of(values, direction), last=values[-1] if values else None,
                        attempts=len(values) if episode.attempts is None else episode.attempts)

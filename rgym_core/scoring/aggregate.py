"""Per solver and task, over runs: best-of-k (MLGym's "@4"), mean and standard error."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

from attrs import define

from rgym_core.scoring.episodes import EpisodeScore, TaskInfo, best_of


@define(frozen=True)
class SolverTaskSummary:
    """One solver on one task over its runs.

    ``best_at_k``/``last_at_k``: the best over runs of the best attempts and of
    the last submissions; ``*_mean``/``*_se``: their mean and standard error
    (``std(ddof=1) / sqrt(n)``) over the runs that produced a valid score.
    ``runs`` and ``failed`` count the scored runs; ``infra`` the runs that the
    infrastructure ended (rgym error, sandbox failure, cancelled, ungraded), which
    are left out of every figure unless asked for.
    """

    solver: str
    task: str
    runs: int
    failed: int
    best_at_k: float | None
    last_at_k: float | None
    best_mean: float | None
    best_se: float | None
    last_mean: float | None
    last_se: float | None
    infra: int = 0


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    """The mean and standard error of ``values`` (``None`` where undefined)."""
    n = len(values)
    if n == 0:
        return None, None
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def summarize(scores: Iterable[EpisodeScore], tasks: Mapping[str, TaskInfo], *,
              infra: Mapping[tuple[str, str], int] | None = None) -> list[SolverTaskSummary]:
    """One summary per (solver, task), sorted by task then solver.  ``infra`` counts
    the left-out infrastructure failures per ``(solver, task)``; a pair with only
    such runs gets a summary with ``runs=0``."""
    groups: dict[tuple[str, str], list[EpisodeScore]] = defaultdict(list)
    for s in scores:
        groups[(s.task, s.solver)].append(s)
    for (solver, task), count in (infra or {}).items():
        if count:
            groups.setdefault((task, solver), [])
    out = []
    for (task, solver), group in sorted(groups.items()):
        direction = tasks[task].direction if task in tasks else "maximize"
        bests = [s.best for s in group if s.best is not None]
        lasts = [s.last for s in group if s.last is not None]
        bm, bse = mean_se(bests)
        lm, lse = mean_se(lasts)
        out.append(SolverTaskSummary(
            solver=solver, task=task, runs=len(group), failed=sum(s.failed for s in group),
            best_at_k=best_of(bests, direction), last_at_k=best_of(lasts, direction),
            best_mean=bm, best_se=bse, last_mean=lm, last_se=lse,
            infra=(infra or {}).get((solver, task), 0)))
    return out


def score_tables(summaries: Iterable[SolverTaskSummary], tasks: Mapping[str, TaskInfo], *,
                 baseline: str = "baseline"
                 ) -> tuple[dict[str, dict[str, float | None]], dict[str, dict[str, float | None]]]:
    """The best-attempt and last-submission tables ``{task: {solver: score}}``
    (best-of-k), with the task's baseline score entered as the solver ``baseline``."""
    best: dict[str, dict[str, float | None]] = {t: {} for t in tasks}
    last: dict[str, dict[str, float | None]] = {t: {} for t in tasks}
    for s in summaries:
        best.setdefault(s.task, {})[s.solver] = s.best_at_k
        last.setdefault(s.task, {})[s.solver] = s.last_at_k
    for t, info in tasks.items():
        if info.baseline is not None:
            best[t][baseline] = info.baseline
            last[t][baseline] = info.baseline
    return best, last

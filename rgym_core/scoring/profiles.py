"""MLGym's performance profiles, AUP and rankings, computed exactly as MLGym does.

Per task, and separately for the best-attempt and last-submission tables:

* a solver is *feasible* when its score is present, at least 0 and at least as
  good as the baseline's (when the baseline has a score);
* with ``best``/``worst`` the best and worst feasible scores, a feasible solver's
  ratio is ``best / score`` for maximised metrics and ``score / best`` for
  minimised ones (so the best solver has ratio 1);
* infeasible and missing solvers get ``(1 + epsilon) * worst_ratio``;
* the task's ``tau_max`` is ``ceil((1 + epsilon) * worst_ratio)``.

The profile of a solver is the fraction of tasks whose ``log10`` ratio is at most
``tau``, on ``numpy.linspace(0, T, 500)`` with
``T = ceil(10 * log10(max tau_max over both tables)) / 10``; AUP is the left
Riemann sum of that step function, rounded to 3 decimals.

Where MLGym is undefined, rgym decides (and the tests pin it down):

* no feasible solver on a task: ``worst_ratio`` is 1, so every solver gets 1.05;
* a feasible score of exactly 0 whose ratio would divide by zero: solvers tied
  with the best get ratio 1, the others are treated as infeasible;
* missing solvers and ties share the average of the rank positions they occupy,
  so rankings never depend on dict or set order (MLGym's did);
* a solver without a valid score on a task (no run there, or only failed runs)
  is infeasible on it, as in MLGym; since an infeasible ratio is finite, it still
  earns area from ``log10(1.05 * worst_ratio)`` to ``T``: :attr:`ProfileSet.floor`
  is the AUP of a solver with no valid score anywhere, which reports quote.

Ranks shown to people (:attr:`ProfileResult.positions`) are competition ranks
(1, 1, 3): solvers whose ranked value is identical share the better position.
Identical means exactly equal: mean ranks and Borda totals are sums of half
integers, which floating point holds exactly, and AUP is compared as published,
rounded to 3 decimals.  A tolerance band is not used because "within tolerance"
is not transitive (a~b and b~c with a!~c would leave no consistent order).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import define, field

from rgym_core.direction import best, better, oriented_ratio, present, sort_key
from rgym_core.specs import Direction

EPSILON = 0.05
GRID_POINTS = 500
BASELINE = "baseline"

#: ``{task: {solver: score or None}}``; a missing key or ``None``/NaN means no valid run.
ScoreTable = Mapping[str, Mapping[str, "float | None"]]


_present = present


@define(frozen=True)
class TaskRatios:
    """The performance ratios of every solver on one task."""

    task: str
    direction: Direction
    ratios: dict[str, float]
    feasible: tuple[str, ...]
    best: float | None
    worst_ratio: float
    tau_max: int


def performance_ratios(task: str, scores: Mapping[str, float | None], solvers: Sequence[str],
                       direction: Direction, *, baseline: str = BASELINE,
                       epsilon: float = EPSILON) -> TaskRatios:
    """MLGym's ``calculate_performance_ratios`` for one task (see the module docstring)."""
    base = scores.get(baseline)
    feasible: list[str] = []
    for solver in sorted(solvers):
        value = scores.get(solver)
        if not _present(value) or value < 0.0:  # type: ignore[operator]
            continue
        if _present(base) and better(base, value, direction):  # worse than the baseline
            continue
        feasible.append(solver)
    ratios: dict[str, float] = {}
    top: float | None = None
    if feasible:
        values = [float(scores[s]) for s in feasible]  # type: ignore[arg-type]
        top = best(values, direction)
        for solver, value in zip(feasible, values, strict=True):
            if value == top:
                ratios[solver] = 1.0
            else:
                ratio = oriented_ratio(top, value, direction)
                ratios[solver] = math.inf if ratio is None else ratio
    finite = [r for r in ratios.values() if math.isfinite(r)]
    worst_ratio = max(finite) if finite else 1.0
    penalty = worst_ratio * (1 + epsilon)
    full = {s: ratios[s] if math.isfinite(ratios.get(s, math.inf)) else penalty for s in solvers}
    return TaskRatios(task=task, direction=direction, ratios=full,
                      feasible=tuple(s for s in feasible if math.isfinite(ratios[s])),
                      best=top, worst_ratio=worst_ratio,
                      tau_max=math.ceil(worst_ratio * (1 + epsilon)))


def grid_end(tau_maxes: Sequence[float]) -> float:
    """T: ``ceil(10 * log10(max tau_max)) / 10`` (MLGym's ``round_up_to_one_decimal``)."""
    return math.ceil(math.log10(max(tau_maxes)) * 10) / 10


def tau_grid(end: float, points: int = GRID_POINTS) -> np.ndarray:
    """The tau grid in log10 ratio space: ``numpy.linspace(0, end, points)``."""
    return np.linspace(0, end, num=points)


def profile_matrix(ratios: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """rho[i, s]: the fraction of tasks (rows of ``ratios``) whose log10 ratio of
    solver ``s`` (columns) is at most ``tau[i]``."""
    n_tasks = ratios.shape[0]
    if n_tasks == 0:
        return np.zeros((tau.size, ratios.shape[1]))
    logs = np.log10(ratios)
    # Sort each solver's log ratios once, then count with searchsorted: O((T + n) log n).
    ordered = np.sort(logs, axis=0)
    counts = np.empty((tau.size, ratios.shape[1]))
    for s in range(ratios.shape[1]):
        counts[:, s] = np.searchsorted(ordered[:, s], tau, side="right")
    return counts / n_tasks


def area_under_profiles(profiles: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Left Riemann sums of each column of ``profiles`` over ``tau`` (not rounded).

    The terms are added left to right (``cumsum``), as MLGym's loop does, so the
    floating-point result is identical to MLGym's.
    """
    if tau.size < 2:
        return np.zeros(profiles.shape[1])
    terms = np.diff(tau)[:, None] * profiles[:-1]
    return np.cumsum(terms, axis=0)[-1]


@define(frozen=True)
class ProfileSet:
    """The profiles and AUP of every solver for one table (best or last)."""

    tasks: dict[str, TaskRatios]
    profiles: dict[str, list[float]]
    aup: dict[str, float]
    #: The AUP of a solver with no valid score on any task (infeasible everywhere).
    floor: float = 0.0


@define(frozen=True)
class ProfileResult:
    """Both tables' profiles on their shared grid, and the rankings."""

    solvers: tuple[str, ...]
    tasks: tuple[str, ...]
    end: float
    tau: list[float]
    best: ProfileSet
    last: ProfileSet
    rankings: dict[str, dict[str, list[str]]] = field(factory=dict)
    #: Competition ranks ``{"best"|"last": {"mean_rank"|"borda"|"aup": {solver: rank}}}``
    #: (1, 1, 3: identical values share a rank; see the module docstring).
    positions: dict[str, dict[str, dict[str, int]]] = field(factory=dict)

    def aup_rows(self) -> list[dict[str, Any]]:
        """``[{"solver", "best_aup", "last_aup", "rank"}]``, best first (ties by
        name); ``rank`` is the competition rank by Best AUP."""
        order = sorted(self.solvers, key=lambda s: (-self.best.aup[s], -self.last.aup[s], s))
        ranks = competition_ranks(self.best.aup, higher_is_better=True)
        return [{"solver": s, "best_aup": self.best.aup[s], "last_aup": self.last.aup[s],
                 "rank": ranks[s]} for s in order]


def _solvers_of(tables: Sequence[ScoreTable], solvers: Sequence[str] | None,
                baseline: str) -> tuple[str, ...]:
    if solvers is not None:
        names = set(solvers)
    else:
        names = {s for table in tables for row in table.values() for s in row}
    if any(baseline in row for table in tables for row in table.values()):
        names.add(baseline)
    return tuple(sorted(names))


def compute_profiles(best: ScoreTable, last: ScoreTable, directions: Mapping[str, Direction], *,
                     solvers: Sequence[str] | None = None, baseline: str = BASELINE,
                     epsilon: float = EPSILON, points: int = GRID_POINTS) -> ProfileResult:
    """Performance profiles, AUP and rankings of the best-attempt and
    last-submission tables, as MLGym computes them.

    ``directions`` gives each task's direction (tasks absent from it are
    maximised).  ``solvers`` defaults to every solver in either table; the
    baseline is included whenever a table has it.
    """
    names = _solvers_of([best, last], solvers, baseline)
    tasks = tuple(sorted(set(best) | set(last)))
    if not tasks:
        raise ValueError("no tasks to score: the score tables are empty")
    per_table: dict[str, dict[str, TaskRatios]] = {}
    for label, table in (("best", best), ("last", last)):
        per_table[label] = {
            t: performance_ratios(t, table.get(t, {}), names, directions.get(t, "maximize"),
                                  baseline=baseline, epsilon=epsilon)
            for t in tasks}
    end = grid_end([r.tau_max for rs in per_table.values() for r in rs.values()])
    tau = tau_grid(end, points)
    sets: dict[str, ProfileSet] = {}
    for label, ratios in per_table.items():
        matrix = np.array([[ratios[t].ratios[s] for s in names] for t in tasks], dtype=float)
        rho = profile_matrix(matrix, tau)
        areas = area_under_profiles(rho, tau)
        penalties = np.array([[ratios[t].worst_ratio * (1 + epsilon)] for t in tasks], dtype=float)
        floor = area_under_profiles(profile_matrix(penalties, tau), tau)
        sets[label] = ProfileSet(
            tasks=ratios,
            profiles={s: rho[:, i].tolist() for i, s in enumerate(names)},
            aup={s: round(float(areas[i]), 3) for i, s in enumerate(names)},
            floor=round(float(floor[0]), 3))
    rankings = {"best": rank_solvers(best, directions, names),
                "last": rank_solvers(last, directions, names)}
    positions = {label: {**rank_positions(table, directions, names),
                         "aup": competition_ranks(sets[label].aup, higher_is_better=True)}
                 for label, table in (("best", best), ("last", last))}
    return ProfileResult(solvers=names, tasks=tasks, end=end, tau=tau.tolist(),
                         best=sets["best"], last=sets["last"], rankings=rankings,
                         positions=positions)


def competition_ranks(values: Mapping[str, float], *, higher_is_better: bool) -> dict[str, int]:
    """Competition ranks ("1224"): each solver's rank is 1 plus the number of solvers
    strictly better than it, so identical values share the better rank."""
    ordered = sorted(values.values(), reverse=higher_is_better)
    first: dict[float, int] = {}
    for i, v in enumerate(ordered, start=1):
        first.setdefault(v, i)
    return {s: first[v] for s, v in values.items()}


def task_ranks(scores: Mapping[str, float | None], solvers: Sequence[str],
               direction: Direction) -> dict[str, float]:
    """1-based rank positions on one task; ties and the missing solvers (placed
    last) share the average of the positions they occupy."""
    pairs: list[tuple[float, str]] = [(float(v), s) for s in solvers
                                      if (v := scores.get(s)) is not None and _present(v)]
    present = sorted(pairs, key=sort_key(direction, operator.itemgetter(0)))
    ranks: dict[str, float] = {}
    position = 1
    i = 0
    while i < len(present):
        j = i
        while j + 1 < len(present) and present[j + 1][0] == present[i][0]:
            j += 1
        shared = position + (j - i) / 2
        for k in range(i, j + 1):
            ranks[present[k][1]] = shared
        position += j - i + 1
        i = j + 1
    missing = [s for s in solvers if s not in ranks]
    for s in missing:
        ranks[s] = position + (len(missing) - 1) / 2
    return ranks


def _rank_values(table: ScoreTable, directions: Mapping[str, Direction],
                 solvers: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Each solver's mean rank position over tasks and its Borda total."""
    n = len(solvers)
    totals = {s: 0.0 for s in solvers}
    tasks = sorted(table)
    for t in tasks:
        for s, r in task_ranks(table[t], solvers, directions.get(t, "maximize")).items():
            totals[s] += r
    mean = {s: totals[s] / len(tasks) if tasks else 0.0 for s in solvers}
    borda = {s: len(tasks) * (n + 1) - totals[s] for s in solvers}
    return mean, borda


def rank_solvers(table: ScoreTable, directions: Mapping[str, Direction],
                 solvers: Sequence[str]) -> dict[str, list[str]]:
    """MLGym's two rankings over tasks: ``mean_rank`` (its "Plackett-Luce" row:
    solvers by mean rank position) and ``borda`` (by the sum over tasks of
    ``n - rank + 1``, with ``n`` solvers).  Ties in the final order go by name
    (:func:`rank_positions` gives tied solvers one rank)."""
    mean, borda = _rank_values(table, directions, solvers)
    return {"mean_rank": sorted(solvers, key=lambda s: (mean[s], s)),
            "borda": sorted(solvers, key=lambda s: (-borda[s], s))}


def rank_positions(table: ScoreTable, directions: Mapping[str, Direction],
                   solvers: Sequence[str]) -> dict[str, dict[str, int]]:
    """The competition ranks of :func:`rank_solvers`' two rankings
    (``{"mean_rank": {solver: rank}, "borda": {...}}``): solvers with an identical
    mean rank (or Borda total) share a rank, the next rank is skipped."""
    mean, borda = _rank_values(table, directions, solvers)
    return {"mean_rank": competition_ranks(mean, higher_is_better=False),
            "borda": competition_ranks(borda, higher_is_better=True)}

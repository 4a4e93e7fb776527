"""ResearchGym-style rates and normalisations, per solver and task.

* *completion*: a run completed a sub-task when it produced a valid result for
  it; a task without declared sub-tasks is its own single sub-task, completed by
  any valid score of the primary metric;
* *completion rate*: the weighted fraction of sub-tasks a run completed, averaged
  over runs;
* *improvement rate*: the fraction of runs whose last submission beats the
  baseline by more than the baseline's measured noise (:func:`improves`: the task
  spec's baseline tolerance, so a re-run of the baseline is not an improvement);
  failed runs do not;
* *normalised performance*: ``score / reference`` for maximised metrics and
  ``reference / score`` for minimised ones (1 means matching the reference/SOTA);
* *RE-Bench normalisation*: ``(score - baseline) / (reference - baseline)``
  (baseline 0, reference 1; it is direction-aware by construction).

For a task with sub-tasks, a run's normalised value is its primary sub-task's
when one is marked primary, otherwise the weighted mean over sub-tasks with an
uncompleted sub-task counting 0.  ``*_at_k`` is the best over runs (Best@k).

Over every task of a report, per solver (:func:`solver_rates`, ResearchGym's
headline figures): the completion rate averaged over all runs, the share of all
runs that improve on their task's baseline, and the mean over tasks of the
normalised Best@k with a task lacking one counting 0 (as ResearchGym's
leaderboard averages tasks with "no valid submission" as 0).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

from attrs import define, field

from rgym_core.direction import best, better, oriented_ratio
from rgym_core.scoring.episodes import Episode, SubtaskInfo, TaskInfo, clean
from rgym_core.specs import Direction


@define(frozen=True)
class TaskRates:
    """ResearchGym's figures for one solver on one task (see the module docstring)."""

    solver: str
    task: str
    runs: int
    completion_rate: float
    improvement_rate: float | None
    normalized_at_k: float | None
    normalized_mean: float | None
    rebench_at_k: float | None
    rebench_mean: float | None
    subtask_completion: dict[str, float] = field(factory=dict)
    subtask_normalized_at_k: dict[str, float | None] = field(factory=dict)
    #: The best value of each sub-task's metric over runs (``None``: never completed).
    subtask_best: dict[str, float | None] = field(factory=dict)
    #: Runs whose last submission beats the baseline by more than its tolerance
    #: (``None``: the task has no baseline).
    improved_runs: int | None = None


@define(frozen=True)
class SolverRates:
    """ResearchGym's headline figures for one solver over every task of a report.

    ``completion_rate``: mean over all the solver's runs of the share of (sub-)tasks
    completed; ``improvement_rate``: improving runs over runs on tasks with a
    baseline; ``normalized_at_k``/``rebench_at_k``: mean over the report's ``tasks``
    of the task's Best@k, a task without one (no run, no valid score, no reference)
    counting 0; ``normalized_tasks`` says how many tasks had one.
    """

    solver: str
    tasks: int
    tasks_run: int
    runs: int
    completion_rate: float
    improvement_rate: float | None
    normalized_at_k: float | None
    normalized_tasks: int
    rebench_at_k: float | None
    rebench_tasks: int


def normalized(score: float | None, reference: float | None, direction: Direction) -> float | None:
    """``score / reference`` (maximise) or ``reference / score`` (minimise);
    ``None`` when either is missing or the division is undefined."""
    return oriented_ratio(score, reference, direction)


def rebench(score: float | None, baseline: float | None, reference: float | None) -> float | None:
    """RE-Bench's linear normalisation: baseline 0, reference 1."""
    if score is None or baseline is None or reference is None or reference == baseline:
        return None
    return (score - baseline) / (reference - baseline)


def improves(score: float | None, info: TaskInfo) -> bool:
    """True when ``score`` beats the task's baseline by more than its tolerance
    (``info.baseline_tolerance``, the baseline's measured noise; ``None``: by any
    margin).  A missing score never improves; a task without a baseline has
    nothing to improve on."""
    if info.baseline is None:
        return False
    margin = info.baseline_tolerance or 0.0
    bar = info.baseline + margin if info.direction == "maximize" else info.baseline - margin
    return better(score, bar, info.direction)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _combine(per_sub: dict[str, float | None], subtasks: tuple[SubtaskInfo, ...]) -> float | None:
    """One run's value over sub-tasks: the primary's, or the weighted mean (missing = 0)."""
    primary = [s for s in subtasks if s.primary]
    if primary:
        return per_sub.get(primary[0].id)
    if all(v is None for v in per_sub.values()):
        return None
    total = math.fsum(s.weight for s in subtasks)
    return math.fsum((per_sub.get(s.id) or 0.0) * s.weight for s in subtasks) / total


def _best(values: list[float]) -> float | None:
    return max(values) if values else None


def graded_subtasks(info: TaskInfo) -> tuple[SubtaskInfo, ...]:
    """The sub-tasks rgym grades (all, when none is marked ``graded: false``): completion
    and the normalised means are taken over these, "of N graded"."""
    return tuple(s for s in info.subtasks if s.graded) or info.subtasks


def task_rates(solver: str, info: TaskInfo, episodes: list[Episode]) -> TaskRates:
    """The rates of one solver's runs on one task."""
    runs = len(episodes)
    improve: list[bool] = []
    norm: list[float] = []
    rb: list[float] = []
    completion: list[float] = []
    sub_done: dict[str, int] = defaultdict(int)
    sub_norm: dict[str, list[float]] = defaultdict(list)
    sub_values: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        values = clean(ep.values)
        last = values[-1] if values else None
        if info.baseline is not None:
            improve.append(improves(last, info))
        if info.subtasks:
            graded = graded_subtasks(info)
            weights = math.fsum(s.weight for s in graded)
            done = [s for s in graded if s.id in ep.subtasks
                    and not math.isnan(ep.subtasks[s.id])]
            completion.append(math.fsum(s.weight for s in done) / weights)
            per_norm: dict[str, float | None] = {}
            per_rb: dict[str, float | None] = {}
            for s in info.subtasks:
                value = ep.subtasks.get(s.id) if s in done else None
                sub_done[s.id] += value is not None
                if value is not None:
                    sub_values[s.id].append(value)
                per_norm[s.id] = normalized(value, s.reference, s.direction)
                per_rb[s.id] = rebench(value, s.baseline, s.reference)
                if per_norm[s.id] is not None:
                    sub_norm[s.id].append(per_norm[s.id])  # type: ignore[arg-type]
            n, r = _combine(per_norm, graded), _combine(per_rb, graded)
        else:
            completion.append(1.0 if last is not None else 0.0)
            n = normalized(last, info.reference, info.direction)
            r = rebench(last, info.baseline, info.reference)
        if n is not None:
            norm.append(n)
        if r is not None:
            rb.append(r)
    return TaskRates(
        solver=solver, task=info.task, runs=runs,
        completion_rate=_mean(completion) or 0.0,
        improvement_rate=(sum(improve) / len(improve)) if improve else None,
        normalized_at_k=_best(norm), normalized_mean=_mean(norm),
        rebench_at_k=_best(rb), rebench_mean=_mean(rb),
        subtask_completion={s.id: sub_done[s.id] / runs for s in info.subtasks} if runs else {},
        subtask_normalized_at_k={s.id: _best(sub_norm[s.id]) for s in info.subtasks},
        subtask_best={s.id: best(sub_values[s.id], s.direction) for s in info.subtasks},
        improved_runs=sum(improve) if improve else None)


def all_rates(episodes: Iterable[Episode], tasks: Mapping[str, TaskInfo]) -> list[TaskRates]:
    """Rates for every (solver, task) pair, sorted by task then solver."""
    groups: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    for ep in episodes:
        groups[(ep.task, ep.solver)].append(ep)
    return [task_rates(solver, tasks.get(task, TaskInfo(task)), eps)
            for (task, solver), eps in sorted(groups.items())]


def solver_rates(rates: Iterable[TaskRates], tasks: Iterable[str]) -> list[SolverRates]:
    """Each solver's figures over ``tasks`` (every task of the report), sorted by name."""
    names = list(tasks)
    by_solver: dict[str, dict[str, TaskRates]] = defaultdict(dict)
    for r in rates:
        by_solver[r.solver][r.task] = r
    out = []
    for solver, mine in sorted(by_solver.items()):
        runs = sum(r.runs for r in mine.values())
        with_baseline = [r for r in mine.values() if r.improved_runs is not None]
        improvable = sum(r.runs for r in with_baseline)
        norms = [mine[t].normalized_at_k if t in mine else None for t in names]
        rebenches = [mine[t].rebench_at_k if t in mine else None for t in names]
        out.append(SolverRates(
            solver=solver, tasks=len(names), tasks_run=sum(1 for t in names if t in mine), runs=runs,
            completion_rate=(math.fsum(r.completion_rate * r.runs for r in mine.values()) / runs
                             if runs else 0.0),
            improvement_rate=(sum(r.improved_runs or 0 for r in with_baseline) / improvable
                              if improvable else None),
            normalized_at_k=(math.fsum(v or 0.0 for v in norms) / len(names)
                             if any(v is not None for v in norms) else None),
            normalized_tasks=sum(v is not None for v in norms),
            rebench_at_k=(math.fsum(v or 0.0 for v in rebenches) / len(names)
                          if any(v is not None for v in rebenches) else None),
            rebench_tasks=sum(v is not None for v in rebenches)))
    return out

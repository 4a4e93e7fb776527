"""The Python API of the scoring protocol: every entry point returns a
:class:`ScoreReport`, and :meth:`ScoreReport.to_data` gives it as plain data
(the same numbers ``rgym score --format json`` prints)::

    from rgym_core.scoring import score_runs
    report = score_runs(["runs/"])
    report.to_data()["aup"]   # [{"solver": ..., "best_aup": ..., "last_aup": ...}, ...]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.scoring.aggregate import SolverTaskSummary, score_tables, summarize
from rgym_core.scoring.episodes import EpisodeScore, TaskInfo, score_episode
from rgym_core.scoring.inputs import (
    DirectionLookup,
    FlaggedRun,
    PendingRun,
    ScoreData,
    load_long,
    load_runs,
    load_wide,
    registry_directions,
)
from rgym_core.scoring.profiles import BASELINE, EPSILON, ProfileResult, compute_profiles
from rgym_core.scoring.rates import SolverRates, TaskRates, all_rates, solver_rates
from rgym_core.specs import Direction

Table = dict[str, dict[str, "float | None"]]


@define
class ScoreReport:
    """Everything the scoring protocol computes from one input."""

    tasks: dict[str, TaskInfo]
    best_table: Table
    last_table: Table
    profiles: ProfileResult
    baseline: str = BASELINE
    episodes: list[EpisodeScore] = field(factory=list)
    summaries: list[SolverTaskSummary] = field(factory=list)
    rates: list[TaskRates] = field(factory=list)
    #: ResearchGym's figures per solver over every task (see :func:`~rgym_core.scoring.rates.solver_rates`).
    solver_rates: list[SolverRates] = field(factory=list)
    notes: list[str] = field(factory=list)
    #: Run directories without a usable result (running, incomplete, corrupt).
    pending: list[PendingRun] = field(factory=list)
    #: What was skipped, each naming its file.
    warnings: list[str] = field(factory=list)
    #: Per solver: (tasks with a valid score, tasks in the report).
    coverage: dict[str, tuple[int, int]] = field(factory=dict)
    #: Whether infrastructure failures were scored (``include_infra``).
    include_infra: bool = False
    #: Runs the integrity monitor flagged (see :class:`~rgym_core.scoring.inputs.FlaggedRun`).
    flagged: list[FlaggedRun] = field(factory=list)
    #: Whether flagged runs were left out of every figure (``--exclude-flagged``).
    exclude_flagged: bool = False

    def partial_solvers(self) -> list[str]:
        """Solvers (not the baseline) without a valid score on some task: as in
        MLGym, their AUP counts each such task as infeasible (ratio 1.05 times the
        task's worst feasible ratio), which still earns area (see
        :attr:`~rgym_core.scoring.profiles.ProfileSet.floor`)."""
        return sorted(s for s, (have, total) in self.coverage.items()
                      if have < total and s != self.baseline)

    def to_data(self) -> dict[str, Any]:
        """Plain data (dicts, lists, numbers, strings, ``None``) of the whole report."""
        p = self.profiles

        def profile_set(ps: Any) -> dict[str, Any]:
            return {
                "tau_max": {t: r.tau_max for t, r in ps.tasks.items()},
                "ratios": {t: r.ratios for t, r in ps.tasks.items()},
                "feasible": {t: list(r.feasible) for t, r in ps.tasks.items()},
                "profiles": ps.profiles,
            }

        aup = []
        for row in p.aup_rows():
            have, total = self.coverage.get(str(row["solver"]), (len(p.tasks), len(p.tasks)))
            aup.append({**row, "tasks_covered": have, "tasks_total": total,
                        "partial": have < total and row["solver"] != self.baseline})
        return {
            "tasks": [attrs.asdict(t) for t in self.tasks.values()],
            "solvers": list(p.solvers),
            "baseline": self.baseline,
            "best_table": self.best_table,
            "last_table": self.last_table,
            "episodes": [attrs.asdict(e) for e in self.episodes],
            "summaries": [attrs.asdict(s) for s in self.summaries],
            "aup": aup,
            "rankings": p.rankings,
            "rank_positions": p.positions,
            "aup_floor": {"best": p.best.floor, "last": p.last.floor},
            "profile": {"T": p.end, "tau": p.tau, "best": profile_set(p.best),
                        "last": profile_set(p.last)},
            "rates": [attrs.asdict(r) for r in self.rates],
            "rates_summary": [attrs.asdict(r) for r in self.solver_rates],
            "pending": [attrs.asdict(r) for r in self.pending],
            "include_infra": self.include_infra,
            "flagged": [attrs.asdict(r) for r in self.flagged],
            "exclude_flagged": self.exclude_flagged,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def score_data(data: ScoreData, *, baseline: str = BASELINE, epsilon: float = EPSILON,
               include_infra: bool = False) -> ScoreReport:
    """Score episodes: per episode, per solver and task, profiles and AUP, rates.

    Episodes that the infrastructure ended are counted apart (``infra``) and left
    out of every figure unless ``include_infra``."""
    tasks = data.tasks
    scored = [ep for ep in data.episodes if include_infra or not ep.infrastructure]
    infra: dict[tuple[str, str], int] = {}
    if not include_infra:
        for ep in data.episodes:
            if ep.infrastructure:
                infra[(ep.solver, ep.task)] = infra.get((ep.solver, ep.task), 0) + 1
    episodes = [score_episode(ep, tasks[ep.task].direction if ep.task in tasks else "maximize")
                for ep in scored]
    summaries = summarize(episodes, tasks, infra=infra)
    best, last = score_tables(summaries, tasks, baseline=baseline)
    directions = {t: info.direction for t, info in tasks.items()}
    solvers = sorted({ep.solver for ep in data.episodes})
    profiles = compute_profiles(best, last, directions, solvers=solvers, baseline=baseline,
                                epsilon=epsilon)
    covered: dict[str, set[str]] = {s: set() for s in profiles.solvers}
    for t, row in best.items():  # a valid score (a failed run is infeasible, as a missing one)
        for solver, value in row.items():
            if value is not None:
                covered.setdefault(solver, set()).add(t)
    total = len(profiles.tasks)
    rates = all_rates(scored, tasks)
    coverage = {s: (len(covered.get(s, set()) & set(profiles.tasks)), total)
                for s in profiles.solvers}
    report = ScoreReport(tasks=dict(tasks), best_table=best, last_table=last, profiles=profiles,
                         baseline=baseline, episodes=episodes, summaries=summaries,
                         rates=rates, solver_rates=solver_rates(rates, profiles.tasks),
                         notes=list(data.notes),
                         pending=list(data.pending), warnings=list(data.warnings),
                         coverage=coverage, include_infra=include_infra,
                         flagged=list(data.flagged), exclude_flagged=data.exclude_flagged)
    for solver in report.partial_solvers():
        have, total = coverage[solver]
        report.warnings.append(
            f"solver {solver!r} has a valid score on {have} of {total} tasks: as in MLGym, its AUP "
            "counts each other task as infeasible (ratio 1.05 x the task's worst feasible ratio), "
            "which still earns area: a solver with no valid score anywhere gets "
            f"{profiles.best.floor:.3f} best / {profiles.last.floor:.3f} last of T = {profiles.end:g}")
    return report


def score_tables_data(best: Mapping[str, Mapping[str, float | None]],
                      last: Mapping[str, Mapping[str, float | None]],
                      directions: Mapping[str, Direction], *, baseline: str = BASELINE,
                      solvers: Sequence[str] | None = None,
                      epsilon: float = EPSILON) -> ScoreReport:
    """Score ready-made best and last tables (``{task: {solver: score}}``)."""
    profiles = compute_profiles(best, last, directions, solvers=solvers, baseline=baseline,
                                epsilon=epsilon)
    tasks = {t: TaskInfo(task=t, direction=directions.get(t, "maximize"),
                         baseline=(best.get(t) or {}).get(baseline)) for t in profiles.tasks}
    return ScoreReport(tasks=tasks, best_table={t: dict(best.get(t, {})) for t in profiles.tasks},
                       last_table={t: dict(last.get(t, {})) for t in profiles.tasks},
                       profiles=profiles, baseline=baseline)


def score_runs(paths: Iterable[Path | str], *, solver_key: str | None = None,
               baseline: str = BASELINE, strict: bool = False,
               include_infra: bool = False, exclude_flagged: bool = False,
               baselines: str = "auto") -> ScoreReport:
    """Score the run directories under ``paths`` (run directories, runs folders,
    sweep folders); a solver named ``baseline`` is renamed ``baseline-agent`` (see
    :mod:`~rgym_core.scoring.inputs`).  ``strict``: an unreadable ``result.json``
    is an error rather than a warning.  ``include_infra``: score the runs the
    infrastructure ended too.  ``exclude_flagged``: leave out the runs the
    integrity monitor flagged (they are listed in ``flagged`` either way)."""
    data = load_runs(paths, solver_key, baseline=baseline, strict=strict,
                     exclude_flagged=exclude_flagged, baselines=baselines)
    return score_data(data, baseline=baseline, include_infra=include_infra)


def score_long(path: Path | str, *, baseline: str = BASELINE, minimize: Sequence[str] = (),
               directions: DirectionLookup | None = None) -> ScoreReport:
    """Score a long-format CSV or JSON Lines file."""
    data = load_long(path, baseline=baseline, minimize=minimize,
                     directions=directions or registry_directions())
    return score_data(data, baseline=baseline)


def score_wide(best_path: Path | str, last_path: Path | str, *, baseline: str = BASELINE,
               minimize: Sequence[str] = (),
               directions: DirectionLookup | None = None) -> ScoreReport:
    """Score MLGym's published best and last tables."""
    wide = load_wide(best_path, last_path, baseline=baseline, minimize=minimize,
                     directions=directions or registry_directions())
    return score_tables_data(wide.best, wide.last, wide.directions, baseline=baseline,
                             solvers=wide.solvers)

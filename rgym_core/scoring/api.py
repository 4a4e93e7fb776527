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
    ScoreData,
    load_long,
    load_runs,
    load_wide,
    registry_directions,
)
from rgym_core.scoring.profiles import BASELINE, EPSILON, ProfileResult, compute_profiles
from rgym_core.scoring.rates import TaskRates, all_rates
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
    notes: list[str] = field(factory=list)

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

        return {
            "tasks": [attrs.asdict(t) for t in self.tasks.values()],
            "solvers": list(p.solvers),
            "baseline": self.baseline,
            "best_table": self.best_table,
            "last_table": self.last_table,
            "episodes": [attrs.asdict(e) for e in self.episodes],
            "summaries": [attrs.asdict(s) for s in self.summaries],
            "aup": p.aup_rows(),
            "rankings": p.rankings,
            "profile": {"T": p.end, "tau": p.tau, "best": profile_set(p.best),
                        "last": profile_set(p.last)},
            "rates": [attrs.asdict(r) for r in self.rates],
            "notes": list(self.notes),
        }


def score_data(data: ScoreData, *, baseline: str = BASELINE,
               epsilon: float = EPSILON) -> ScoreReport:
    """Score episodes: per episode, per solver and task, profiles and AUP, rates."""
    tasks = data.tasks
    episodes = [score_episode(ep, tasks[ep.task].direction if ep.task in tasks else "maximize")
                for ep in data.episodes]
    summaries = summarize(episodes, tasks)
    best, last = score_tables(summaries, tasks, baseline=baseline)
    directions = {t: info.direction for t, info in tasks.items()}
    solvers = sorted({ep.solver for ep in data.episodes})
    profiles = compute_profiles(best, last, directions, solvers=solvers, baseline=baseline,
                                epsilon=epsilon)
    return ScoreReport(tasks=dict(tasks), best_table=best, last_table=last, profiles=profiles,
                       baseline=baseline, episodes=episodes, summaries=summaries,
                       rates=all_rates(data.episodes, tasks), notes=list(data.notes))


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
               baseline: str = BASELINE) -> ScoreReport:
    """Score the run directories under ``paths``; a solver named ``baseline`` is
    renamed ``baseline-agent`` (see :mod:`~rgym_core.scoring.inputs`)."""
    return score_data(load_runs(paths, solver_key, baseline=baseline), baseline=baseline)


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

"""MLGym's performance ratios, profiles, AUP and rankings: hand-computed cases,
edge cases, properties, and the reproduction of MLGym's published AUP table."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rgym_core.scoring.profiles import (
    area_under_profiles,
    competition_ranks,
    compute_profiles,
    grid_end,
    performance_ratios,
    rank_solvers,
    task_ranks,
)

TABLES = Path(__file__).parent / "data" / "mlgym_tables"
MLGYM_MINIMIZED = {"3-SAT": "minimize", "Language Modeling": "minimize"}


# ----------------------------------------------------------------------------- ratios


def test_ratios_maximize_hand_computed():
    r = performance_ratios("t", {"baseline": 0.5, "a": 1.0, "b": 0.8}, ["a", "b", "baseline"],
                           "maximize")
    assert r.ratios == {"a": 1.0, "b": 1.25, "baseline": 2.0}
    assert r.worst_ratio == 2.0
    assert r.tau_max == 3  # ceil(2 * 1.05)
    assert r.feasible == ("a", "b", "baseline")


def test_ratios_minimize_with_infeasible_and_missing():
    r = performance_ratios("t", {"baseline": 10.0, "a": 5.0, "b": 8.0, "c": 12.0},
                           ["a", "b", "baseline", "c", "d"], "minimize")
    assert r.ratios["a"] == 1.0
    assert r.ratios["b"] == pytest.approx(1.6)
    assert r.ratios["baseline"] == 2.0
    # c is worse than the baseline, d has no score: both get 1.05 x the worst ratio
    assert r.ratios["c"] == r.ratios["d"] == pytest.approx(2.1)
    assert r.tau_max == 3
    assert "c" not in r.feasible


def test_negative_baseline_makes_the_baseline_infeasible():
    r = performance_ratios("t", {"baseline": -0.2, "a": 0.5, "b": 0.1}, ["a", "b", "baseline"],
                           "maximize")
    assert r.ratios["a"] == 1.0 and r.ratios["b"] == pytest.approx(5.0)
    assert r.ratios["baseline"] == pytest.approx(5.25)
    assert r.tau_max == 6  # ceil(5 * 1.05) = ceil(5.25)


def test_all_solvers_infeasible_get_the_smallest_penalty():
    r = performance_ratios("t", {"baseline": -1.0, "a": -0.5, "b": None}, ["a", "b", "baseline"],
                           "maximize")
    assert r.feasible == ()
    assert r.best is None
    assert r.ratios == {"a": 1.05, "b": 1.05, "baseline": 1.05}
    assert r.tau_max == 2


def test_feasible_zero_score_maximize_is_treated_as_infeasible():
    r = performance_ratios("t", {"baseline": -1.0, "a": 0.0, "b": 2.0}, ["a", "b", "baseline"],
                           "maximize")
    assert r.ratios["b"] == 1.0
    assert r.ratios["a"] == pytest.approx(1.05)  # best / 0 is undefined
    assert r.feasible == ("b",)


def test_all_zero_scores_tie_at_ratio_one():
    r = performance_ratios("t", {"baseline": 0.0, "a": 0.0}, ["a", "baseline"], "maximize")
    assert r.ratios == {"a": 1.0, "baseline": 1.0}
    assert r.tau_max == 2


def test_zero_is_the_best_of_a_minimised_metric():
    r = performance_ratios("t", {"baseline": 5.0, "a": 0.0, "b": 3.0}, ["a", "b", "baseline"],
                           "minimize")
    assert r.ratios["a"] == 1.0
    assert r.ratios["b"] == r.ratios["baseline"] == pytest.approx(1.05)


def test_ties_share_ratio_one():
    r = performance_ratios("t", {"a": 2.0, "b": 2.0, "c": 1.0}, ["a", "b", "c"], "maximize")
    assert r.ratios == {"a": 1.0, "b": 1.0, "c": 2.0}


def test_nothing_is_feasible_below_a_negative_baseline_of_a_minimised_metric():
    r = performance_ratios("t", {"baseline": -1.0, "a": 0.0}, ["a", "baseline"], "minimize")
    assert r.feasible == () and r.ratios == {"a": 1.05, "baseline": 1.05}


def test_grid_end_rounds_up_to_one_decimal():
    assert grid_end([2, 3]) == 0.5  # log10 3 = 0.477
    assert grid_end([27, 2]) == 1.5  # log10 27 = 1.431
    assert grid_end([10]) == 1.0
    assert grid_end([3 * 10**20]) == 20.5  # huge ratios stay exact integers


# ----------------------------------------------------------------------------- AUP


def test_aup_hand_computed():
    # t1: a=10, b=5 -> ratios 1, 2; tau_max 3.  t2: a=b=1 -> ratios 1, 1; tau_max 2.
    # T = ceil(10 log10 3) / 10 = 0.5, grid step h = 0.5 / 499.
    # b counts t1 from the first grid point >= log10 2: index ceil(log10(2) / h) = 301.
    # AUP_b = 0.5 * 0.5 + 0.5 * (499 - 301) * h = 0.25 + 0.0992 = 0.349.
    best = {"t1": {"a": 10.0, "b": 5.0}, "t2": {"a": 1.0, "b": 1.0}}
    res = compute_profiles(best, best, {})
    assert res.end == 0.5
    assert res.best.aup == {"a": 0.5, "b": 0.349}
    assert res.last.aup == res.best.aup
    assert res.best.profiles["b"][0] == 0.5 and res.best.profiles["b"][-1] == 1.0


def test_left_riemann_sum_uses_the_left_value():
    tau = np.array([0.0, 1.0, 3.0])
    profile = np.array([[0.5], [1.0], [0.0]])
    assert area_under_profiles(profile, tau).tolist() == [0.5 * 1 + 1.0 * 2]


def test_best_and_last_tables_share_one_grid():
    best = {"t": {"a": 1.0, "b": 0.1}}  # ratio 10: tau_max 11
    last = {"t": {"a": 1.0, "b": 1.0}}
    res = compute_profiles(best, last, {})
    assert res.best.tasks["t"].tau_max == 11 and res.last.tasks["t"].tau_max == 2
    assert res.end == math.ceil(10 * math.log10(11)) / 10
    assert res.last.aup["b"] == round(res.end, 3)


def test_baseline_is_a_solver_and_missing_solvers_are_penalised():
    best = {"t1": {"baseline": 1.0, "a": 2.0}, "t2": {"baseline": 1.0}}
    res = compute_profiles(best, best, {}, solvers=["a"])
    assert res.solvers == ("a", "baseline")
    assert res.best.tasks["t2"].ratios == {"a": pytest.approx(1.05), "baseline": 1.0}


def test_empty_tables_are_an_error():
    with pytest.raises(ValueError, match="no tasks"):
        compute_profiles({}, {}, {})


# ----------------------------------------------------------------------------- rankings


def test_task_ranks_share_positions_for_ties_and_missing():
    ranks = task_ranks({"a": 3.0, "b": 3.0, "c": 1.0}, ["a", "b", "c", "d", "e"], "maximize")
    assert ranks == {"a": 1.5, "b": 1.5, "c": 3.0, "d": 4.5, "e": 4.5}
    assert task_ranks({"a": 3.0, "c": 1.0}, ["a", "c"], "minimize") == {"c": 1.0, "a": 2.0}


def test_rankings_hand_computed():
    table = {"t1": {"a": 3.0, "b": 2.0, "c": 1.0}, "t2": {"a": 1.0, "b": 3.0, "c": 2.0},
             "t3": {"a": 3.0, "b": 1.0}}
    # ranks: a 1,3,1 (mean 1.67); b 2,1,2 (1.67); c 3,2,3 (2.67); a and b tie -> by name
    out = rank_solvers(table, {}, ["a", "b", "c"])
    assert out == {"mean_rank": ["a", "b", "c"], "borda": ["a", "b", "c"]}
    out = rank_solvers(table, {"t1": "minimize"}, ["a", "b", "c"])
    # t1 minimised: a 3, b 2, c 1 -> a 3,3,1 = 7; b 2,1,2 = 5; c 1,2,3 = 6
    assert out["mean_rank"] == ["b", "c", "a"] and out["borda"] == ["b", "c", "a"]


# ----------------------------------------------------------------------------- properties

score = st.one_of(st.none(), st.floats(-5, 100, allow_nan=False, width=32))
names = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True)


@st.composite
def tables(draw):
    solvers = draw(names)
    tasks = draw(st.lists(st.sampled_from(["t1", "t2", "t3", "t4", "t5"]), min_size=1,
                          max_size=5, unique=True))
    best = {t: {s: draw(score) for s in solvers + ["baseline"]} for t in tasks}
    last = {t: {s: draw(score) for s in solvers + ["baseline"]} for t in tasks}
    dirs = {t: draw(st.sampled_from(["maximize", "minimize"])) for t in tasks}
    return solvers, best, last, dirs


@settings(max_examples=60, deadline=None)
@given(tables())
def test_aup_never_exceeds_t_and_profiles_grow(data):
    solvers, best, last, dirs = data
    res = compute_profiles(best, last, dirs)
    for ps in (res.best, res.last):
        for s in res.solvers:
            assert 0 <= ps.aup[s] <= round(res.end, 3)
            assert all(np.diff(ps.profiles[s]) >= 0)
            assert ps.profiles[s][-1] == 1.0  # every ratio is within tau_max <= 10^T
        for r in ps.tasks.values():
            assert all(v >= 1.0 for v in r.ratios.values())
            assert max(r.ratios.values()) <= r.tau_max


@settings(max_examples=60, deadline=None)
@given(tables())
def test_a_solver_best_on_every_task_gets_aup_t(data):
    solvers, best, last, dirs = data
    for table in (best, last):
        for t, row in table.items():
            present = [v for v in row.values() if v is not None]
            if dirs[t] == "minimize" and (row["baseline"] or 0.0) < 0:
                row["baseline"] = -row["baseline"]  # else nothing is feasible: see below
            top = max(present + [1.0]) + 1 if dirs[t] == "maximize" else 0.0
            row["star"] = top
    res = compute_profiles(best, last, dirs)
    assert res.best.aup["star"] == round(res.end, 3) == res.last.aup["star"]


@settings(max_examples=40, deadline=None)
@given(tables(), st.randoms(use_true_random=False))
def test_order_of_solvers_and_tasks_changes_nothing(data, rnd: random.Random):
    solvers, best, last, dirs = data

    def shuffled(table):
        tasks = list(table)
        rnd.shuffle(tasks)
        out = {}
        for t in tasks:
            items = list(table[t].items())
            rnd.shuffle(items)
            out[t] = dict(items)
        return out

    a = compute_profiles(best, last, dirs)
    order = list(solvers)
    rnd.shuffle(order)
    b = compute_profiles(shuffled(best), shuffled(last), dict(reversed(dirs.items())),
                         solvers=order)
    assert a.best.aup == b.best.aup and a.last.aup == b.last.aup
    assert a.rankings == b.rankings
    assert a.aup_rows() == b.aup_rows()


@settings(max_examples=40, deadline=None)
@given(tables(), st.floats(0.01, 100))
def test_scaling_a_task_keeps_aup(data, factor):
    solvers, best, last, dirs = data
    scaled = {t: {s: None if v is None else v * factor for s, v in row.items()}
              for t, row in best.items()}
    a = compute_profiles(best, best, dirs)
    b = compute_profiles(scaled, scaled, dirs)
    for s in a.solvers:  # ratios are scale-free; a grid point may move by rounding only
        assert abs(a.best.aup[s] - b.best.aup[s]) <= 0.01


# ----------------------------------------------------------------------------- acceptance


def _table(path: Path) -> dict[str, dict[str, float | None]]:
    with path.open() as fh:
        return {r["Task"]: {k: float(v) if v else None for k, v in r.items() if k != "Task"}
                for r in csv.DictReader(fh)}


@pytest.mark.parametrize("variant", ["aggregate", "test"])
def test_reproduces_mlgym_published_aup(variant):
    best = _table(TABLES / f"best_scores_{variant}.csv")
    last = _table(TABLES / f"last_scores_{variant}.csv")
    res = compute_profiles(best, last, MLGYM_MINIMIZED)
    assert res.end == 1.5
    assert res.best.tasks["Blotto"].tau_max == 27 and res.last.tasks["Blotto"].tau_max == 14
    with (TABLES / f"aup_scores_{variant}.csv").open() as fh:
        published = list(csv.DictReader(fh))
    assert len(published) == 13
    for row in published:
        model = row["Model"]
        assert abs(res.best.aup[model] - float(row["Best AUP"])) <= 0.002, model
        assert abs(res.last.aup[model] - float(row["Last AUP"])) <= 0.002, model


# ----------------------------------------------------------------------------- ties and coverage


def test_equal_scores_share_rank_one_competition_style():
    table = {"t1": {"a": 0.9, "b": 0.9, "c": 0.5}, "t2": {"a": 0.7, "b": 0.7, "c": 0.6}}
    res = compute_profiles(table, table, {})
    for label in ("best", "last"):
        for kind in ("mean_rank", "borda", "aup"):
            assert res.positions[label][kind] == {"a": 1, "b": 1, "c": 3}, (label, kind)


def test_competition_ranks_share_and_skip():
    assert competition_ranks({"a": 2.0, "b": 1.0, "c": 1.0, "d": 0.5}, higher_is_better=True) == \
        {"a": 1, "b": 2, "c": 2, "d": 4}
    assert competition_ranks({"a": 2.0, "b": 1.0, "c": 1.0}, higher_is_better=False) == \
        {"b": 1, "c": 1, "a": 3}


def _mlgym_aup_of_an_infeasible_solver(worst_ratio: float, end: float) -> float:
    """MLGym's compute_aup, written out: a left Riemann sum of the step function that is
    1 from log10(1.05 * worst_ratio) on, over numpy.linspace(0, T, 500), rounded to 3."""
    tau = np.linspace(0, end, 500)
    rho = [1.0 if math.log10(1.05 * worst_ratio) <= x else 0.0 for x in tau]
    total = 0.0
    for i in range(len(tau) - 1):
        total += (tau[i + 1] - tau[i]) * rho[i]
    return round(total, 3)


def test_a_solver_covering_0_of_1_tasks_gets_mlgyms_aup_for_an_infeasible_solver():
    # only the baseline is feasible: worst ratio 1, tau_max ceil(1.05) = 2, T = 0.4; the
    # solver without a score is infeasible (ratio 1.05) and so still "solves" the task
    # from log10(1.05) = 0.021 on, as in MLGym
    table = {"t": {"baseline": 0.5, "a": None}}
    res = compute_profiles(table, table, {}, solvers=["a"])
    expected = _mlgym_aup_of_an_infeasible_solver(1.0, 0.4)
    assert res.end == 0.4
    assert res.best.aup["a"] == res.last.aup["a"] == expected == 0.378
    assert res.best.aup["baseline"] == 0.4
    # the AUP of a solver with no valid score anywhere, which the report quotes
    assert res.best.floor == res.last.floor == expected

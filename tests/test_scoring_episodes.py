"""Per-episode best attempt and last submission, best-of-k with mean and SE,
and ResearchGym's rates: hand-computed cases."""

from __future__ import annotations

import math

import pytest

from rgym_core.scoring.aggregate import mean_se, score_tables, summarize
from rgym_core.scoring.episodes import Episode, SubtaskInfo, TaskInfo, score_episode
from rgym_core.scoring.rates import all_rates, normalized, rebench, task_rates


def test_best_attempt_and_last_submission():
    ep = Episode("a", "t", "0", values=[0.5, 0.9, float("nan"), 0.7])
    s = score_episode(ep, "maximize")
    assert (s.best, s.last, s.attempts, s.failed) == (0.9, 0.7, 3, False)
    s = score_episode(ep, "minimize")
    assert (s.best, s.last) == (0.5, 0.7)


def test_episode_without_valid_score_fails():
    s = score_episode(Episode("a", "t", "0", values=[]), "maximize")
    assert s.failed and s.best is None and s.last is None


def test_mean_and_standard_error():
    assert mean_se([]) == (None, None)
    assert mean_se([2.0]) == (2.0, None)
    mean, se = mean_se([1.0, 2.0, 3.0])
    assert mean == 2.0 and se == pytest.approx(1 / math.sqrt(3))


def test_best_of_k_over_runs_and_failed_runs():
    tasks = {"t": TaskInfo("t", "loss", "minimize", baseline=5.0)}
    eps = [Episode("a", "t", "0", [4.0, 3.0, 3.5]), Episode("a", "t", "1", [2.5, 2.8]),
           Episode("a", "t", "2", []), Episode("b", "t", "0", [6.0])]
    summaries = summarize([score_episode(e, "minimize") for e in eps], tasks)
    a, b = summaries
    assert (a.solver, a.runs, a.failed) == ("a", 3, 1)
    assert (a.best_at_k, a.last_at_k) == (2.5, 2.8)
    assert a.best_mean == pytest.approx(2.75) and a.last_mean == pytest.approx(3.15)
    assert a.best_se == pytest.approx(0.25)
    assert (b.best_at_k, b.best_se) == (6.0, None)
    best, last = score_tables(summaries, tasks)
    assert best == {"t": {"a": 2.5, "b": 6.0, "baseline": 5.0}}
    assert last == {"t": {"a": 2.8, "b": 6.0, "baseline": 5.0}}


def test_normalisations():
    assert normalized(0.8, 0.9, "maximize") == pytest.approx(0.8 / 0.9)
    assert normalized(2.0, 1.0, "minimize") == 0.5
    assert normalized(None, 1.0, "maximize") is None
    assert normalized(1.0, None, "maximize") is None
    assert normalized(0.0, 1.0, "minimize") is None
    # RE-Bench: baseline 0, reference 1, direction-aware by construction
    assert rebench(0.85, 0.8, 0.9) == pytest.approx(0.5)
    assert rebench(1.5, 2.0, 1.0) == pytest.approx(0.5)  # minimised: 2.0 -> 1.0
    assert rebench(2.5, 2.0, 1.0) == pytest.approx(-0.5)
    assert rebench(1.0, 1.0, 1.0) is None


def test_task_rates_without_subtasks():
    info = TaskInfo("t", "acc", "maximize", baseline=0.5, reference=1.0)
    eps = [Episode("a", "t", "0", [0.4, 0.6]), Episode("a", "t", "1", [0.9, 0.4]),
           Episode("a", "t", "2", [])]
    r = task_rates("a", info, eps)
    assert r.runs == 3
    assert r.completion_rate == pytest.approx(2 / 3)
    assert r.improvement_rate == pytest.approx(1 / 3)  # only run 0's last (0.6) beats 0.5
    assert r.normalized_at_k == pytest.approx(0.6)
    assert r.normalized_mean == pytest.approx(0.5)
    assert r.rebench_at_k == pytest.approx(0.2)  # (0.6 - 0.5) / (1.0 - 0.5)
    assert r.rebench_mean == pytest.approx((0.2 - 0.2) / 2)


def test_task_rates_without_baseline_has_no_improvement_rate():
    r = task_rates("a", TaskInfo("t"), [Episode("a", "t", "0", [1.0])])
    assert r.improvement_rate is None and r.normalized_at_k is None and r.completion_rate == 1.0


def test_weighted_subtasks():
    subs = (SubtaskInfo("s1", "acc", reference=1.0, baseline=0.0, weight=3.0),
            SubtaskInfo("s2", "acc", reference=2.0, baseline=0.0, weight=1.0))
    info = TaskInfo("t", "acc", baseline=0.0, subtasks=subs)
    eps = [Episode("a", "t", "0", [0.5], subtasks={"s1": 0.5, "s2": 2.0}),
           Episode("a", "t", "1", [0.5], subtasks={"s2": 1.0})]
    r = task_rates("a", info, eps)
    assert r.completion_rate == pytest.approx((1.0 + 0.25) / 2)
    assert r.subtask_completion == {"s1": 0.5, "s2": 1.0}
    # run 0: (0.5 * 3 + 1.0 * 1) / 4 = 0.625; run 1: (0 * 3 + 0.5) / 4 = 0.125
    assert r.normalized_at_k == pytest.approx(0.625)
    assert r.normalized_mean == pytest.approx(0.375)
    assert r.subtask_normalized_at_k == {"s1": 0.5, "s2": 1.0}


def test_primary_subtask_decides_the_normalised_score():
    subs = (SubtaskInfo("s1", "acc", reference=1.0),
            SubtaskInfo("s2", "acc", reference=2.0, primary=True))
    info = TaskInfo("t", "acc", subtasks=subs)
    r = task_rates("a", info, [Episode("a", "t", "0", [], subtasks={"s1": 1.0, "s2": 1.0})])
    assert r.normalized_at_k == 0.5
    rates = all_rates([Episode("b", "t", "0"), Episode("a", "t", "0")], {"t": info})
    assert [x.solver for x in rates] == ["a", "b"]


# ----------------------------------------------------------------------------- noise


def test_a_rerun_of_the_baseline_within_its_tolerance_is_not_improved():
    # Fashion-MNIST's baseline re-run: 0.7757 against 0.7756 is one test image, inside a
    # tolerance of 0.001; only a run past the tolerance improves on the baseline
    info = TaskInfo("fmnist", "accuracy", "maximize", baseline=0.7756, baseline_tolerance=0.001)
    eps = [Episode("b", "fmnist", "0", [0.7757]), Episode("b", "fmnist", "1", [0.7745]),
           Episode("b", "fmnist", "2", [0.7770]), Episode("b", "fmnist", "3", [])]
    r = task_rates("b", info, eps)
    assert (r.improved_runs, r.improvement_rate) == (1, 0.25)


def test_a_minimised_metric_must_beat_the_baseline_by_more_than_its_tolerance():
    info = TaskInfo("sat", "Time", "minimize", baseline=10.0, baseline_tolerance=0.5)
    eps = [Episode("a", "sat", "0", [9.6]), Episode("a", "sat", "1", [9.4]),
           Episode("a", "sat", "2", [10.4])]
    assert task_rates("a", info, eps).improved_runs == 1  # only 9.4 is past 10 - 0.5


def test_without_a_tolerance_any_strictly_better_score_improves():
    info = TaskInfo("t", "acc", "maximize", baseline=0.5)
    eps = [Episode("a", "t", "0", [0.5]), Episode("a", "t", "1", [0.5000001])]
    assert task_rates("a", info, eps).improved_runs == 1

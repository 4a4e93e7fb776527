"""ResearchGym's scoring end to end: completion and improvement rates, reference-normalised
scores and Best@k per sub-task, per task and over all tasks, computed by `rgym score` from
real run directories of the five ResearchGym packs' cpu profiles
(``tests/data/researchgym-runs``: result, config and trajectory of each run, written by
`rgym run`; workspace archives left out), plus the arithmetic on hand-made runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core.records import EpisodeResult, ExitStatus, ScoreRecord, SubTask
from rgym_core.rundir import create_run_dir, write_result
from rgym_core.scoring import score_runs

SCORE = [sys.executable, "-c", "from rgym_core.scoring.cli import score; score()"]
RUNS = Path(__file__).parent / "data" / "researchgym-runs"
TASKS = ["researchgym/continual-learning", "researchgym/cross-modal-retrieval",
         "researchgym/improving-replay-buffers", "researchgym/materials-tokenization",
         "researchgym/time-series-explanation"]


def rgym_score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCORE, *args], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})


def add_run(runs: Path, task: str, solver: str, seed: int, value: float | None,
            subtasks: dict[str, float] | None = None, *, side_graded: bool = True) -> None:
    """A run whose last submission scored ``value`` (``None``: no valid score)."""
    score = ScoreRecord(step=1, kind="submit", valid=value is not None,
                        scores={} if value is None else {"acc": value},
                        subtasks={k: {"acc": v} for k, v in (subtasks or {}).items()})
    result = EpisodeResult(
        run_id=f"{solver}-{seed}-{task[-1]}", task_id=task, agent=f"x/{solver}", seed=seed,
        status=ExitStatus.SUBMITTED if value is not None else ExitStatus.EVALUATION_ERROR,
        scores=[score], primary_metric="acc", baseline_scores={"acc": 50.0},
        reference_scores={"acc": 100.0},
        subtasks=[SubTask(id="main", metric="acc", primary=True, baseline_scores={"acc": 50.0},
                          reference_scores={"acc": 100.0}),
                  SubTask(id="side", metric="acc", baseline_scores={"acc": 40.0},
                          graded=side_graded)])
    write_result(create_run_dir(runs / task.replace("/", "__") / solver / f"run-{seed}").path, result)


def test_rates_over_tasks_follow_researchgym(tmp_path: Path) -> None:
    # task t1: three runs of "a": one beats the baseline and completes both sub-tasks, one
    # completes the primary only without beating it, one fails
    add_run(tmp_path, "p/t1", "a", 0, 80.0, {"main": 80.0, "side": 45.0})
    add_run(tmp_path, "p/t1", "a", 1, 45.0, {"main": 45.0})
    add_run(tmp_path, "p/t1", "a", 2, None)
    # task t2: one run of "a", failed; "b" runs only t2 and beats it
    add_run(tmp_path, "p/t2", "a", 0, None)
    add_run(tmp_path, "p/t2", "b", 0, 60.0, {"main": 60.0})
    report = score_runs([tmp_path])
    rates = {(r.task, r.solver): r for r in report.rates}
    t1 = rates[("p/t1", "a")]
    assert t1.completion_rate == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert t1.improvement_rate == pytest.approx(1 / 3) and t1.improved_runs == 1
    assert t1.normalized_at_k == pytest.approx(0.8)           # Best@k of the primary sub-task
    assert t1.rebench_at_k == pytest.approx((80 - 50) / (100 - 50))
    assert t1.subtask_completion == {"main": pytest.approx(2 / 3), "side": pytest.approx(1 / 3)}
    assert t1.subtask_best == {"main": 80.0, "side": 45.0}
    assert t1.subtask_normalized_at_k["main"] == pytest.approx(0.8)
    assert t1.subtask_normalized_at_k["side"] is None      # no reference for it
    summary = {s.solver: s for s in report.solver_rates}
    a, b = summary["a"], summary["b"]
    assert (a.tasks, a.tasks_run, a.runs) == (2, 2, 4)
    assert a.completion_rate == pytest.approx((1.0 + 0.5 + 0.0 + 0.0) / 4)  # over all runs
    assert a.improvement_rate == pytest.approx(1 / 4)
    assert a.normalized_at_k == pytest.approx((0.8 + 0.0) / 2)  # a task without a value counts 0
    assert a.normalized_tasks == 1
    assert (b.tasks_run, b.normalized_at_k) == (1, pytest.approx((0.0 + 0.6) / 2))
    data = report.to_data()
    assert {row["solver"] for row in data["rates_summary"]} == {"a", "b"}


def test_sub_tasks_rgym_does_not_grade_are_listed_and_left_out(tmp_path: Path) -> None:
    """A sub-task marked ``graded: false`` (declared by ResearchGym, no grader in rgym yet)
    counts in neither completion nor the means, and the report says "of N graded"."""
    add_run(tmp_path, "p/t1", "a", 0, 80.0, {"main": 80.0}, side_graded=False)
    report = score_runs([tmp_path])
    (t1,) = report.rates
    assert t1.completion_rate == pytest.approx(1.0)  # the one graded sub-task, done
    proc = rgym_score(str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "p/t1 / a (1 of 2 sub-tasks graded)" in proc.stdout
    side = next(line for line in proc.stdout.splitlines() if line.strip().startswith("side"))
    assert "not graded" in side


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not RUNS.is_dir():
        pytest.fail(f"{RUNS} is missing: the recorded ResearchGym runs ship with the repository")
    dest = tmp_path_factory.mktemp("rg") / "runs"
    shutil.copytree(RUNS, dest)
    return dest


def test_five_researchgym_packs_scored_end_to_end(runs: Path) -> None:
    proc = rgym_score(str(runs), "--solver-key", "tag:solver", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert sorted(t["task"] for t in data["tasks"]) == TASKS  # one profile (cpu): plain names
    rates = {(r["task"], r["solver"]): r for r in data["rates"]}
    summary = {r["solver"]: r for r in data["rates_summary"]}

    # hand-written result files (ResearchGym's forgeries) get no score anywhere
    for task in TASKS:
        forged = rates[(task, "forger")]
        assert forged["completion_rate"] == 0.0 and forged["improvement_rate"] == 0.0, task
        assert forged["normalized_at_k"] is None
    assert summary["forger"]["tasks_run"] == 5 and summary["forger"]["completion_rate"] == 0.0
    assert summary["forger"]["normalized_at_k"] is None

    # the baseline agent reproduces each baseline: each cpu profile declares the sub-tasks its
    # grader scores (profiles.cpu.subtasks), so a graded run completes them all; it improves nothing
    cpu_subtasks = {"researchgym/continual-learning": {"synthetic-cifar-n3": 54.7222},
                    "researchgym/cross-modal-retrieval": {"qs-image": 35.0, "qs-text": 45.333333},
                    "researchgym/improving-replay-buffers": {"hopper-1k": 75.8175},
                    "researchgym/materials-tokenization": {"ner-sofc": 38.780416},
                    "researchgym/time-series-explanation": {"state": 0.070873}}
    for task in TASKS:
        base = rates[(task, "baseline-tag")]
        assert base["completion_rate"] == 1.0 and base["improvement_rate"] == 0.0, task
        assert base["subtask_best"] == pytest.approx(cpu_subtasks[task]), task
        assert set(base["subtask_completion"].values()) == {1.0}, task
    # normalised against each cpu profile's reference solution (rgym's, measured by the grader:
    # pixel prototypes, centering, whole-word vocabulary, occlusion); replay has none recorded
    references = {"researchgym/continual-learning": 93.3333, "researchgym/cross-modal-retrieval": 76.666667,
                  "researchgym/materials-tokenization": 41.124452,
                  "researchgym/time-series-explanation": 0.141572}
    for task, reference in references.items():
        base = rates[(task, "baseline-tag")]
        primary = next(iter(cpu_subtasks[task].values()))
        assert base["normalized_at_k"] == pytest.approx(primary / reference, abs=1e-6), task
        assert base["rebench_at_k"] == pytest.approx(0.0, abs=1e-9), task
    assert rates[("researchgym/improving-replay-buffers", "baseline-tag")]["normalized_at_k"] is None

    # a better method: improvement counted, normalised against the reference solution
    for task in references:
        better = rates[(task, "improver")]
        assert better["improvement_rate"] == 1.0 and better["completion_rate"] == 1.0, task
        assert better["normalized_at_k"] == pytest.approx(1.0, abs=1e-4), task
        assert better["rebench_at_k"] == pytest.approx(1.0, abs=1e-4), task
    assert rates[("researchgym/improving-replay-buffers", "improver")]["improvement_rate"] == 1.0

    # over all five tasks: ResearchGym's headline figures
    imp = summary["improver"]
    assert imp["tasks"] == 5 and imp["tasks_run"] == 5
    assert imp["improvement_rate"] == 1.0 and imp["completion_rate"] == 1.0
    assert imp["normalized_at_k"] == pytest.approx(4 / 5, abs=1e-4)  # replay has no reference: counts 0
    assert imp["normalized_tasks"] == 4
    base = summary["baseline-tag"]
    assert base["improvement_rate"] == 0.0 and base["completion_rate"] == 1.0
    assert base["normalized_at_k"] == pytest.approx(
        sum(next(iter(cpu_subtasks[t].values())) / r for t, r in references.items()) / 5, abs=1e-6)

    table = rgym_score(str(runs), "--solver-key", "tag:solver")
    assert table.returncode == 0, table.stderr
    for title in ("ResearchGym rates", "ResearchGym sub-tasks", "ResearchGym over all 5 tasks"):
        assert title in table.stdout
    csv = rgym_score(str(runs), "--solver-key", "tag:solver", "--format", "csv").stdout
    assert "rates_summary,,improver,improvement_rate,1.0" in csv
    assert "subtask_rates,researchgym/continual-learning/synthetic-cifar-n3,baseline-tag," in csv

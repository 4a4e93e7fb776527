"""`rgym score` on real folders: corrupt and unreadable files, infrastructure
failures counted apart, partial coverage, no padding rows, runs without a result,
exit codes (2 for bad input, as `rgym run`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rgym_core.records import EpisodeResult, ExitStatus, ScoreRecord
from rgym_core.rundir import Owner, TrajectoryWriter, create_run_dir, write_config, write_result
from rgym_core.scoring import score_runs

SCORE = [sys.executable, "-c", "from rgym_core.scoring.cli import score; score()"]


def rgym_score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCORE, *args], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})


def add_run(runs: Path, task: str, agent: str, seed: int, values: list[float | None],
            status: ExitStatus = ExitStatus.SUBMITTED, baseline: float = 0.5) -> Path:
    scores = [ScoreRecord(step=i, kind="submit" if i == len(values) - 1 else "validate",
                          valid=v is not None, scores={} if v is None else {"acc": v})
              for i, v in enumerate(values)]
    result = EpisodeResult(run_id=f"{agent}{seed}{task[-1]}", task_id=task, agent=f"x/{agent}",
                           status=status, seed=seed, scores=scores, primary_metric="acc",
                           baseline_scores={"acc": baseline}, reference_scores={"acc": 1.0})
    run = create_run_dir(runs / task.replace("/", "__") / agent / f"run-{seed}")
    write_result(run.path, result)
    return run.path


def test_corrupt_result_is_skipped_with_a_warning_and_strict_makes_it_an_error(tmp_path):
    add_run(tmp_path, "p/t1", "a", 0, [0.7])
    bad = add_run(tmp_path, "p/t1", "a", 1, [0.8]) / "result.json"
    bad.write_text('{"run_id": "x", "task_id": ')  # torn by a full disk
    proc = rgym_score(str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert f"warning: skipped {bad}: line 1: invalid JSON" in proc.stderr
    data = json.loads(proc.stdout)
    assert {s["solver"]: s["runs"] for s in data["summaries"]} == {"a": 1}
    assert [(p["path"], p["state"]) for p in data["pending"]] == [(str(bad.parent), "corrupt")]
    strict = rgym_score(str(tmp_path), "--strict")
    assert strict.returncode == 2
    assert strict.stderr.strip() == f"error: {bad}: line 1: invalid JSON: Expecting value"


def test_infrastructure_failures_are_counted_apart_and_left_out(tmp_path):
    add_run(tmp_path, "p/t1", "a", 0, [0.6, 0.7])
    add_run(tmp_path, "p/t1", "a", 1, [0.4], status=ExitStatus.SUBMITTED)
    add_run(tmp_path, "p/t1", "a", 2, [0.99], status=ExitStatus.AUTOSUBMITTED_SANDBOX_ERROR)
    add_run(tmp_path, "p/t1", "a", 3, [], status=ExitStatus.ERROR)
    add_run(tmp_path, "p/t1", "a", 4, [], status=ExitStatus.CANCELLED)
    add_run(tmp_path, "p/t1", "a", 5, [None], status=ExitStatus.EVALUATION_ERROR)  # the agent's
    report = score_runs([tmp_path])
    (s,) = report.summaries
    assert (s.runs, s.failed, s.infra, s.best_at_k) == (3, 1, 3, 0.7)
    (rates,) = report.rates
    assert rates.runs == 3 and rates.improvement_rate == 1 / 3  # 0.7 beats 0.5; 0.4 and None do not
    every = score_runs([tmp_path], include_infra=True)
    (s,) = every.summaries
    assert (s.runs, s.failed, s.infra, s.best_at_k) == (6, 3, 0, 0.99)
    table = rgym_score(str(tmp_path))
    assert table.returncode == 0, table.stderr
    assert "infra" in table.stdout and "--include-infra scores them" in table.stdout


def test_partial_coverage_is_shown_and_absent_solvers_get_no_rows(tmp_path):
    for seed in (0, 1):
        add_run(tmp_path, "p/t1", "full", seed, [0.8])
        add_run(tmp_path, "p/t2", "full", seed, [0.6])
    add_run(tmp_path, "p/t1", "half", 0, [0.9])
    proc = rgym_score(str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert ("warning: solver 'half' has a valid score on 1 of 2 tasks: as in MLGym, its AUP "
            "counts each other task as infeasible") in proc.stderr
    aup = {r["solver"]: r for r in json.loads(proc.stdout)["aup"]}
    assert (aup["half"]["tasks_covered"], aup["half"]["tasks_total"], aup["half"]["partial"]) == \
        (1, 2, True)
    assert (aup["full"]["tasks_covered"], aup["full"]["partial"]) == (2, False)
    table = rgym_score(str(tmp_path)).stdout
    t2 = table.split("p/t2 (max)", 1)[1].split("AUP", 1)[0]
    assert "full" in t2 and "half" not in t2  # no row of dashes for a solver without runs
    aup_rows = table.split("AUP (maximum", 1)[1].split("Rankings", 1)[0]
    half = next(line for line in aup_rows.splitlines() if line.strip().startswith("half"))
    assert half.rstrip().endswith("1/2") and " !" in half
    assert "each other task counts as infeasible (as in MLGym)" in " ".join(aup_rows.split())


def test_runs_without_a_result_are_listed_by_name(tmp_path):
    add_run(tmp_path, "p/t1", "a", 0, [0.7])
    run = create_run_dir(tmp_path / "p__t1" / "a" / "killed")
    write_config(run.path, {"run_id": "k1", "agent": "x/a", "task": {"id": "p/t1"},
                            "run": {"task": "p/t1", "agent": "a", "model": None}},
                 owner=Owner(host=Owner.current().host, pid=2**22 + 7, identity="gone:1"))
    with TrajectoryWriter(run.path) as writer:
        writer.write("start", {"run_id": "k1", "task": "p/t1", "agent": "x/a"})
        writer.write("step", {"step": {"index": 1}})
    report = score_runs([tmp_path])
    assert [(p.path, p.state, p.task, p.solver, p.steps) for p in report.pending] == [
        (str(run.path), "incomplete", "p/t1", "a", 1)]
    table = rgym_score(str(tmp_path)).stdout
    assert "Runs without a result" in table and "incomplete" in table
    assert "".join(str(run.path).split()) in "".join(table.split())  # a long path wraps


def test_bad_input_exits_2_naming_the_file(tmp_path):
    missing = rgym_score(str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'nowhere'}: no such file or directory"
    latin = tmp_path / "long.csv"
    latin.write_bytes("solver,task,run,metric,value\nJosé,t,0,acc,0.5\n".encode("latin-1"))
    proc = rgym_score("--input", str(latin))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {latin}: not UTF-8 text")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = rgym_score(str(empty))
    assert proc.returncode == 2 and f"{empty}: no result.json found" in proc.stderr


def test_runs_graded_without_confinement_are_flagged(tmp_path):
    path = add_run(tmp_path, "p/t1", "a", 0, [0.7])
    add_run(tmp_path, "p/t1", "a", 1, [0.8])
    raw = json.loads((path / "result.json").read_text())
    raw["scores"][-1]["confined"] = False
    (path / "result.json").write_text(json.dumps(raw))
    report = score_runs([tmp_path])
    assert report.warnings == ["1 run(s) were graded without confining the agent's code (this "
                               "machine lacked bubblewrap or a separate user): their scores are "
                               "only as trustworthy as that code"]


def _with_spec(run: Path, baseline: dict) -> None:
    """Give a run the config.json `rgym run` writes, with the task's (profile's) baseline."""
    write_config(run, {"run_id": run.name, "task": {"id": "p/t1", "baseline": baseline}})


def test_improvement_needs_more_than_the_tolerance_the_task_spec_records(tmp_path):
    # a re-run of the baseline (0.7757 against 0.7756: one image) is noise, not improvement
    for seed, value in enumerate([0.7757, 0.7745, 0.7770]):
        run = add_run(tmp_path, "p/t1", "baseline-agent", seed, [value], baseline=0.7756)
        _with_spec(run, {"scores": {"acc": 0.7756}, "tolerance": 0.05,
                         "tolerances": {"acc": 0.001}})
    report = score_runs([tmp_path])
    assert report.tasks["p/t1"].baseline_tolerance == 0.001  # tolerances[metric] beats tolerance
    (rates,) = report.rates
    assert (rates.improved_runs, rates.runs) == (1, 3)  # only 0.7770 is past 0.7756 + 0.001
    (overall,) = report.solver_rates
    assert overall.improvement_rate == 1 / 3


def test_a_spec_without_a_tolerance_allows_the_rounding_of_its_last_digit(tmp_path):
    run = add_run(tmp_path, "p/t1", "a", 0, [0.52])
    _with_spec(run, {"scores": {"acc": 0.5}})
    assert score_runs([tmp_path]).tasks["p/t1"].baseline_tolerance == 0.05  # half of 0.1
    # a result without config.json (copied on its own) gets the same default
    other = tmp_path / "other"
    add_run(other, "p/t1", "a", 0, [0.52])
    assert score_runs([other]).tasks["p/t1"].baseline_tolerance == 0.05


def test_a_solver_without_a_valid_score_gets_mlgyms_aup_and_the_report_says_why(tmp_path):
    add_run(tmp_path, "p/t1", "a", 0, [None])  # ran, never produced a valid score
    proc = rgym_score(str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    aup = {r["solver"]: r for r in json.loads(proc.stdout)["aup"]}
    assert (aup["a"]["best_aup"], aup["a"]["tasks_covered"], aup["a"]["tasks_total"]) == (0.378, 0, 1)
    assert aup["baseline"]["best_aup"] == 0.4
    assert ("warning: solver 'a' has a valid score on 0 of 1 tasks: as in MLGym, its AUP counts "
            "each other task as infeasible (ratio 1.05 x the task's worst feasible ratio), which "
            "still earns area: a solver with no valid score anywhere gets 0.378 best / 0.378 last "
            "of T = 0.4") in proc.stderr

"""``rgym score`` as a subprocess: the MLGym tables, run directories, formats,
the plot, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core.records import EpisodeResult, ExitStatus, ScoreRecord
from rgym_core.serialization import unstructure

TABLES = Path(__file__).parent / "data" / "mlgym_tables"
SCORE = [sys.executable, "-c", "from rgym_core.scoring.cli import score; score()"]


def rgym_score(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCORE, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def mlgym_args(variant: str = "aggregate") -> list[str]:
    return ["--best-table", str(TABLES / f"best_scores_{variant}.csv"),
            "--last-table", str(TABLES / f"last_scores_{variant}.csv"),
            "--minimize", "3-SAT", "--minimize", "Language Modeling"]


def test_mlgym_tables_json_reproduce_the_published_aup():
    proc = rgym_score(*mlgym_args(), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["profile"]["T"] == 1.5
    got = {r["solver"]: r for r in data["aup"]}
    with (TABLES / "aup_scores_aggregate.csv").open() as fh:
        for row in csv.DictReader(fh):
            assert abs(got[row["Model"]]["best_aup"] - float(row["Best AUP"])) <= 0.002
            assert abs(got[row["Model"]]["last_aup"] - float(row["Last AUP"])) <= 0.002
    assert data["rankings"]["best"]["mean_rank"][0] == "gpt-o1"


def test_table_output_and_plot(tmp_path):
    plot = tmp_path / "profiles.png"
    proc = rgym_score(*mlgym_args("test"), "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    for title in ("Scores per task", "AUP (maximum T = 1.5)", "Rankings over tasks"):
        assert title in proc.stdout
    assert "3-SAT (min)" in proc.stdout and "House Price (max)" in proc.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _result(root: Path, name: str, seed: int, values: list[float | None]) -> None:
    scores = [ScoreRecord(step=i, kind="validate" if i < len(values) - 1 else "submit",
                          valid=v is not None, scores={} if v is None else {"r2": v})
              for i, v in enumerate(values)]
    result = EpisodeResult(run_id=f"{name}{seed}", task_id="rgym/demo", agent=f"rgym/{name}",
                           status=ExitStatus.SUBMITTED, seed=seed, scores=scores,
                           primary_metric="r2", baseline_scores={"r2": 0.5},
                           reference_scores={"r2": 0.95})
    d = root / "rgym__demo" / name / f"run-{seed}"
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps(unstructure(result)))


def test_run_directories_csv_and_output_file(tmp_path):
    _result(tmp_path, "scripted", 0, [0.6, 0.7])
    _result(tmp_path, "scripted", 1, [None])
    _result(tmp_path, "other", 0, [0.9, 0.8])
    out = tmp_path / "scores.csv"
    proc = rgym_score(str(tmp_path), "--format", "csv", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    pick = {(r["table"], r["task"], r["solver"], r["field"]): r["value"] for r in rows}
    assert pick[("summary", "rgym/demo", "scripted", "failed")] == "1"
    assert pick[("best", "rgym/demo", "other", "score")] == "0.9"
    assert pick[("last", "rgym/demo", "other", "score")] == "0.8"
    assert pick[("best", "rgym/demo", "baseline", "score")] == "0.5"
    assert pick[("rates", "rgym/demo", "scripted", "improvement_rate")] == "0.5"
    assert float(pick[("aup", "", "other", "best_aup")]) == float(pick[("aup", "", "", "T")])


def test_rgym_group_has_score(tmp_path):
    _result(tmp_path, "scripted", 0, [0.6])
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "score", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ResearchGym rates" in proc.stdout and "rgym/demo (max)" in proc.stdout


@pytest.mark.parametrize("args, message", [
    ([], "give exactly one input"),
    (["--best-table", "x.csv"], "--best-table and --last-table go together"),
    (["--input", "x.csv", "--plot", "p.gif"], "use a .png, .svg or .pdf file name"),
])
def test_usage_errors(args, message):
    proc = rgym_score(*args)
    assert proc.returncode == 2 and message in proc.stderr


def test_malformed_input_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("Task,baseline,a\nT1,1,oops\n")
    proc = rgym_score("--best-table", str(bad), "--last-table", str(bad))
    assert proc.returncode == 2  # bad input, as `rgym run`
    assert proc.stderr.strip() == (f"error: {bad}: row 2, column 3 (a): expected a number, "
                                   f"got 'oops'")


def rgym_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory) -> Path:
    """Real runs of the demo task: the scripted agent and the agent named
    ``baseline`` (the rgym-agent-baseline pack), two seeds each."""
    runs = tmp_path_factory.mktemp("score") / "runs"
    for seed in ("1", "2"):
        for agent in ("scripted", "baseline"):
            proc = rgym_cli("run", "rgym/demo", "--agent", agent, "--seed", seed, "--runs-dir",
                            str(runs), "-q")
            assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list(runs.rglob("result.json"))) == 4
    return runs


def test_score_real_demo_runs(demo_runs, tmp_path):
    plot = tmp_path / "demo.svg"
    proc = rgym_cli("score", str(demo_runs), "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    for title in ("Scores per task", "AUP (maximum T =", "Rankings over tasks",
                  "ResearchGym rates"):
        assert title in proc.stdout
    assert "rgym/demo (max)" in proc.stdout and "scripted" in proc.stdout
    assert plot.read_text().lstrip().startswith("<?xml")


def test_agent_named_baseline_is_its_own_solver(demo_runs):
    proc = rgym_cli("score", str(demo_runs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    results = [json.loads(p.read_text()) for p in demo_runs.rglob("result.json")]
    task_baseline = results[0]["baseline_scores"]["r2"]
    agent_scores = [r["scores"][-1]["scores"]["r2"] for r in results
                    if r["agent"].endswith("/baseline")]
    assert sorted(data["solvers"]) == ["baseline", "baseline-agent", "scripted"]
    summary = {s["solver"]: s for s in data["summaries"]}
    assert "baseline" not in summary  # the protocol baseline has no runs
    assert (summary["baseline-agent"]["runs"], summary["scripted"]["runs"]) == (2, 2)
    assert summary["baseline-agent"]["best_at_k"] == max(agent_scores)
    assert data["best_table"]["rgym/demo"]["baseline"] == task_baseline
    assert {r["solver"] for r in data["rates"]} == {"baseline-agent", "scripted"}
    note = "note: agent 'baseline' shown as 'baseline-agent' ('baseline' = task's baseline)"
    assert data["notes"] == [note]
    assert proc.stderr.strip() == note


def test_renamed_agent_keeps_clear_of_other_solver_names(demo_runs):
    proc = rgym_cli("score", str(demo_runs), "--baseline-column", "scripted", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # "scripted" now names the task's baseline score, so the scripted agent is renamed,
    # and the agent called baseline is an ordinary solver again
    summary = {s["solver"]: s["runs"] for s in data["summaries"]}
    assert summary == {"baseline": 2, "scripted-agent": 2}
    assert data["best_table"]["rgym/demo"]["scripted"] == data["tasks"][0]["baseline"]


def test_tables_fit_an_80_column_terminal(demo_runs):
    proc = rgym_cli("score", str(demo_runs), env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in proc.stdout
    for cell in ("rgym/demo (max)", "baseline-agent", "scripted", "mean±se", "RE-Bench"):
        assert any(cell in line for line in lines), cell
    assert lines[-1] == ("note: agent 'baseline' shown as 'baseline-agent' "
                         "('baseline' = task's baseline)")


def test_solvers_with_identical_scores_share_a_rank_in_every_printed_table(tmp_path):
    long = tmp_path / "scores.csv"
    long.write_text("solver,task,run,metric,value\n"
                    "baseline,t1,0,acc,0.5\nbaseline,t2,0,acc,0.5\n"
                    "twin-a,t1,0,acc,0.9\ntwin-b,t1,0,acc,0.9\nthird,t1,0,acc,0.7\n"
                    "twin-a,t2,0,acc,0.8\ntwin-b,t2,0,acc,0.8\nthird,t2,0,acc,0.6\n")
    proc = rgym_score("--input", str(long), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    ranks: dict[tuple[str, str, str], str] = {}
    for row in csv.DictReader(io.StringIO(proc.stdout)):
        if row["table"].startswith("rank_"):
            ranks[(row["table"], row["field"], row["solver"])] = row["value"]
    for table in ("rank_best", "rank_last"):
        for kind in ("mean_rank", "borda", "aup"):
            got = {s: ranks[(table, kind, s)] for s in ("twin-a", "twin-b", "third", "baseline")}
            assert got == {"twin-a": "1", "twin-b": "1", "third": "3", "baseline": "4"}, (table, kind)
    text = rgym_score("--input", str(long)).stdout
    rankings = text.split("Rankings over tasks", 1)[1].split("ResearchGym", 1)[0]
    rows = {line.split()[0]: line.split()[1:] for line in rankings.splitlines()
            if line.strip() and line.split()[0] in ("twin-a", "twin-b", "third")}
    assert rows == {"twin-a": ["1"] * 4, "twin-b": ["1"] * 4, "third": ["3"] * 4}
    aup = text.split("AUP (maximum", 1)[1].split("Rankings", 1)[0]
    firsts = {line.split()[0]: line.split()[1] for line in aup.splitlines()
              if line.strip() and line.split()[0] in ("twin-a", "twin-b", "third")}
    assert firsts == {"twin-a": "1", "twin-b": "1", "third": "3"}  # the AUP table's rank column


def test_long_input_baseline_tolerance_column_decides_what_improves(tmp_path):
    long = tmp_path / "scores.csv"
    long.write_text("solver,task,run,metric,value,tolerance\n"
                    "baseline,fmnist,0,accuracy,0.7756,0.001\n"
                    "baseline-agent,fmnist,0,accuracy,0.7757,\n"
                    "baseline-agent,fmnist,1,accuracy,0.7770,\n"
                    "baseline,blotto,0,Score,-0.24851,\n"
                    "baseline-agent,blotto,0,Score,-0.24850,\n")
    proc = rgym_score("--input", str(long), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    tolerance = {t["task"]: t["baseline_tolerance"] for t in data["tasks"]}
    assert tolerance == {"fmnist": 0.001, "blotto": 5e-6}  # stated; else the last digit's rounding
    improved = {r["task"]: r["improved_runs"] for r in data["rates"]}
    assert improved == {"fmnist": 1, "blotto": 1}  # -0.24850 is past -0.24851 by 1e-5 > 5e-6
    bad = tmp_path / "bad.csv"
    bad.write_text("solver,task,run,metric,value,tolerance\na,t,0,acc,0.5,0.1\n")
    proc = rgym_score("--input", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: {bad}: row 2: column 'tolerance': only the baseline's "
                                   "rows ('baseline') carry a tolerance; leave it empty on other rows")


def test_help_states_the_improvement_and_tie_rules():
    text = " ".join(rgym_score("--help").stdout.split())
    assert "beats the baseline by more than the baseline's measured noise" in text
    assert "share a rank, and the next rank is skipped (1, 1, 3)" in text

"""``rgym score`` as a subprocess: the MLGym tables, run directories, formats,
the plot, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
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
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"Error: {bad}: row 2, column 3 (a): expected a number, "
                                   f"got 'oops'")


def test_score_real_demo_runs(tmp_path):
    runs = tmp_path / "runs"
    for seed in ("1", "2"):
        proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo",
                               "--agent", "scripted", "--seed", seed, "--runs-dir", str(runs)],
                              capture_output=True, text=True, timeout=300)
        assert (runs / "rgym__demo").is_dir(), proc.stdout + proc.stderr
    plot = tmp_path / "demo.svg"
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "score", str(runs), "--plot",
                           str(plot)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for title in ("Scores per task", "AUP (maximum T =", "Rankings over tasks",
                  "ResearchGym rates"):
        assert title in proc.stdout
    assert "rgym/demo (max)" in proc.stdout and "scripted" in proc.stdout
    assert plot.read_text().lstrip().startswith("<?xml")

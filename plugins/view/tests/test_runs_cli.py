"""`rgym runs [PATH]` (filters, --json) and `rgym show RUN_DIR` (a run's summary and
findings), run as a user types them, on real rgym/demo episodes and on synthetic
run directories (other tasks, agents, models, a flagged run, a killed one, an old one)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import make_run, rgym
from rgym_core.runs import iter_summaries
from rgym_core.runs_cli import filter_runs, parse_since


def runs_json(*args: str, cwd: Path) -> list[dict[str, Any]]:
    proc = rgym("runs", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


FLAG = {"integrity": {"flagged": True, "counts": {"error": 1}, "kinds": ["provenance"],
                      "findings": [{"kind": "provenance", "severity": "error", "steps": [1],
                                    "message": "results.txt was written by echo"}]}}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs-cli") / "runs"
    ok = [{"tool": "bash", "args": {"command": "ls"}, "output": "a\n", "exit_code": 0, "cost": 0.25,
           "tokens": (1000, 50)}]
    now = time.time()
    make_run(runs / "vision-a", ok, task="vision/cifar10", agent="react/react", model="openai/gpt-x",
             final={"accuracy": 0.7}, gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.7}}],
             started_at=now - 600)
    make_run(runs / "vision-b", ok, task="vision/cifar10", agent="aide/aide", model="anthropic/claude-y",
             final={"accuracy": 0.99}, extras=FLAG, started_at=now - 300,
             gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.99}}])
    make_run(runs / "lang-old", ok, task="language/lm", agent="rgym/baseline", model=None,
             final={"accuracy": 0.5}, gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.5}}],
             started_at=now - 5 * 86400)
    make_run(runs / "lang-broken", ok, task="language/lm", agent="react/react", model="openai/gpt-x",
             status="evaluation_error", final=None, started_at=now - 200,
             gradings=[{"step": 1, "kind": "submit", "valid": False, "error": "no id column"}])
    make_run(runs / "killed", ok * 3, task="vision/cifar10", agent="react/react", model="openai/gpt-x",
             status=None, started_at=now - 100)
    return runs


def names(rows: list[dict[str, Any]]) -> list[str]:
    return [Path(r["path"]).name for r in rows]


def test_runs_lists_every_run_newest_first_with_scores(mixed: Path, tmp_path: Path) -> None:
    rows = runs_json(str(mixed), cwd=tmp_path)
    assert names(rows) == ["killed", "lang-broken", "vision-b", "vision-a", "lang-old"]
    row = rows[3]
    assert (row["task"], row["agent"], row["model"], row["status"]) == \
        ("vision/cifar10", "react/react", "openai/gpt-x", "submitted")
    assert row["score"] == 0.7 and row["baseline"] == 0.5 and row["cost_usd"] == 0.25
    killed = rows[0]
    assert killed["state"] == "incomplete" and killed["steps"] == 3 and killed["cost_usd"] == 0.75
    # the table a person reads
    proc = rgym("runs", str(mixed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["started", "task", "solver", "seed"]
    assert any("0.7 (base 0.5, +40.0%)" in line and "vision-a" in line for line in lines)
    assert any("FLAGGED provenance" in line and "vision-b" in line for line in lines)
    assert "5 runs; `rgym show RUN_DIR` for one" in proc.stdout


FILTERS = [
    ({"task": ["vision"]}, ["killed", "vision-b", "vision-a"]),
    ({"task": ["language/*"]}, ["lang-broken", "lang-old"]),
    ({"agent": ["react"]}, ["killed", "lang-broken", "vision-a"]),
    ({"agent": ["aide", "baseline"]}, ["vision-b", "lang-old"]),
    ({"model": ["none"]}, ["lang-old"]),
    ({"model": ["openai/*"], "task": ["vision"]}, ["killed", "vision-a"]),
    ({"status": ["submitted"]}, ["vision-b", "vision-a", "lang-old"]),
    ({"status": ["evaluation_error"]}, ["lang-broken"]),
    ({"status": ["incomplete"]}, ["killed"]),
    ({"status": ["flagged"]}, ["vision-b"]),
    ({"status": ["failed"]}, ["killed", "lang-broken"]),
    ({"status": ["graded"]}, ["vision-b", "vision-a", "lang-old"]),
    ({"since": "1d"}, ["killed", "lang-broken", "vision-b", "vision-a"]),
    ({"since": "4m"}, ["killed", "lang-broken"]),
]


def test_runs_filters(mixed: Path, tmp_path: Path) -> None:
    summaries = sorted(iter_summaries([mixed]), key=lambda s: s.started_at or 0.0, reverse=True)
    for filters, expected in FILTERS:
        if "since" in filters:
            filters = {**filters, "since": parse_since(filters["since"])}
        got = [Path(s.path).name for s in filter_runs(summaries, **filters)]
        assert got == expected, filters
    # the same filters on the command line (repeatable options, combined, --limit)
    assert names(runs_json(str(mixed), "--agent", "aide", "--agent", "baseline", cwd=tmp_path)) == \
        ["vision-b", "lang-old"]
    assert names(runs_json(str(mixed), "--model", "openai/*", "--status", "failed", "--since", "1d",
                           "--limit", "1", cwd=tmp_path)) == ["killed"]


def test_runs_finds_the_demo_runs_and_explains_bad_input(runs_folder: Path, demo_runs: dict[str, Path],
                                                         tmp_path: Path) -> None:
    rows = runs_json(str(runs_folder), "--task", "rgym/demo", cwd=tmp_path)
    assert sorted(names(rows)) == sorted(p.name for p in demo_runs.values())
    assert all(r["status"] == "submitted" and r["score"] is not None for r in rows)
    proc = rgym("runs", str(runs_folder), "--since", "last tuesday", cwd=tmp_path)
    assert proc.returncode != 0 and "--since: cannot read 'last tuesday'" in proc.stderr
    proc = rgym("runs", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode != 0 and "nowhere" in proc.stderr
    proc = rgym("runs", str(runs_folder), "--task", "no-such-task", cwd=tmp_path)
    assert proc.returncode == 0 and "no runs match (of 4)" in proc.stdout


def test_show_run_dir_prints_the_summary_gradings_and_findings(mixed: Path, demo_runs: dict[str, Path],
                                                               tmp_path: Path) -> None:
    proc = rgym("show", str(demo_runs["honest"]), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "task:     rgym/demo" in text and "status:   submitted" in text
    assert "validations (1):" in text and "step    2  r2=0.872" in text
    assert "final grading (submit, step 3)" in text
    assert f"`rgym view {demo_runs['honest']}`" in text
    proc = rgym("show", str(mixed / "vision-b"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "FLAGGED provenance" in proc.stdout or "provenance" in proc.stdout
    assert "results.txt was written by echo" in proc.stdout
    proc = rgym("show", str(mixed / "killed"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "state:    incomplete" in proc.stdout and "steps:    3" in proc.stdout
    proc = rgym("show", str(mixed / "lang-broken"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["summary"]["status"] == "evaluation_error"
    assert data["final"]["valid"] is False and data["final"]["error"] == "no id column"


def test_parse_since() -> None:
    now = 1_800_000_000.0
    assert parse_since("30m", now=now) == now - 1800
    assert parse_since("1w", now=now) == now - 7 * 86400
    assert parse_since("yesterday", now=now) == parse_since("today", now=now) - 86400
    with pytest.raises(ValueError, match="2026-11-30"):
        parse_since("soon", now=now)


def test_damaged_runs_are_listed_and_viewed_not_fatal(tmp_path: Path) -> None:
    """A result.json that is not JSON, and a trajectory torn by a hard kill."""
    from rgym_view.analysis import analyze_paths
    from rgym_view.html import write_viewer

    runs = tmp_path / "runs"
    ok = [{"tool": "bash", "args": {"command": "ls"}, "output": "a\n", "exit_code": 0}]
    make_run(runs / "corrupt", ok, final={"accuracy": 0.7},
             gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.7}}])
    (runs / "corrupt" / "result.json").write_text("{not json")
    make_run(runs / "torn", ok * 2, status=None)
    with (runs / "torn" / "trajectory.jsonl").open("a") as fh:
        fh.write('{"type": "step", "step": {"index": 3, "act')  # killed mid-line
    rows = {Path(r["path"]).name: r for r in runs_json(str(runs), cwd=tmp_path)}
    assert rows["corrupt"]["state"] == "corrupt" and "result.json cannot be read" in rows["corrupt"]["error"]
    assert rows["torn"]["state"] == "incomplete" and rows["torn"]["steps"] == 2
    assert names(runs_json(str(runs), "--status", "corrupt", cwd=tmp_path)) == ["corrupt"]
    page, count = write_viewer([runs], tmp_path / "view.html")
    assert count == 2 and page.stat().st_size > 0
    report = analyze_paths([runs])
    assert sorted(Path(r.path).name for r in report.runs) == ["corrupt", "torn"]
    proc = rgym("show", str(runs / "corrupt"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "state:    corrupt" in proc.stdout


def test_a_run_put_up_for_review_says_review_not_warning(tmp_path: Path) -> None:
    """A run the monitor does not flag but puts up for review (a score at the task's
    ceiling) is shown as REVIEW with the finding's kind, not as "1 warning"."""
    runs = tmp_path / "runs"
    review = {"integrity": {"flagged": False, "counts": {"warning": 1}, "kinds": ["score_ceiling"],
                            "review": True, "review_kinds": ["score_ceiling"],
                            "findings": [{"kind": "score_ceiling", "severity": "warning", "steps": [1],
                                          "review": True, "message": "accuracy 1.0 is the ceiling"}]}}
    plain = {"integrity": {"flagged": False, "counts": {"warning": 1}, "kinds": ["other"],
                           "findings": [{"kind": "other", "severity": "warning", "steps": [1],
                                         "message": "a warning"}]}}
    step = [{"tool": "bash", "args": {"command": "ls"}, "output": "a\n", "exit_code": 0}]
    make_run(runs / "at-ceiling", step, task="mlgym/titanic", final={"accuracy": 1.0}, extras=review,
             gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 1.0}}])
    make_run(runs / "warned", step, task="mlgym/titanic", final={"accuracy": 0.8}, extras=plain,
             gradings=[{"step": 1, "kind": "submit", "scores": {"accuracy": 0.8}}])
    lines = rgym("runs", str(runs), cwd=tmp_path).stdout.splitlines()
    assert any("REVIEW score_ceiling" in line and "at-ceiling" in line for line in lines), lines
    assert any("1 warning" in line and "warned" in line for line in lines), lines
    assert not any("1 warning" in line and "at-ceiling" in line for line in lines), lines

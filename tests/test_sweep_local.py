"""``rgym sweep`` with the local executor, as a user runs it: real episodes, real
subprocesses, a real SIGKILL and a real Ctrl-C.

The acceptance sweep is issue #16's command restricted to fast tasks: every MLGym
task of the game-theory pack but Colonel Blotto (the slowest), with the baseline
agent, seeds 1-3, four at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.rundir import iter_run_dirs
from rgym_core.testing import run_cli

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", REPO.parent / "shared" / "data"))
ENV = {"COLUMNS": "200", "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}


def acceptance_args(data_dir: Path) -> list[str]:
    return ["--plugins", "gametheory,baseline", "sweep", "mlgym/*", "--exclude", "mlgym/blotto",
            "--agent", "baseline", "--seeds", "1-3", "--max-parallel", "4", "--data-dir", str(data_dir)]


def start(args: list[str], cwd: Path, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rgym_core.cli", *args], cwd=cwd, text=True,
                            env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kwargs)


def events(sweep: Path) -> list[dict[str, Any]]:
    path = sweep / ".sweep" / "events.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of a killed sweep
            pass
    return out


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def results(sweep: Path) -> dict[str, tuple[float, str]]:
    """Cell -> (mtime, text) of every result.json."""
    return {str(r.path.relative_to(sweep)): (r.result_path.stat().st_mtime, r.result_path.read_text())
            for r in iter_run_dirs(sweep) if r.result_path.exists()}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return DATA if DATA.is_dir() else tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[dict[str, Any]]:
    """The acceptance sweep run once, without a sweep folder named (the default one)."""
    cwd = tmp_path_factory.mktemp("acceptance")
    proc = run_cli(*acceptance_args(data_dir), cwd=cwd, env=ENV, timeout=900)
    yield {"cwd": cwd, "proc": proc}


@pytest.mark.timeout(900)
def test_acceptance_sweep_runs_every_cell_then_only_prints_the_summary(
        uninterrupted: dict[str, Any], data_dir: Path) -> None:
    proc, cwd = uninterrupted["proc"], uninterrupted["cwd"]
    assert proc.returncode == 0, proc.stderr
    (sweep,) = (cwd / "sweeps").iterdir()
    assert (sweep / "sweep.json").is_file()
    runs = results(sweep)
    # the tasks' default profile is `rgym` (rgym's statement and budgets; `mlgym` is MLGym's)
    assert sorted(runs) == [f"mlgym__{task}@rgym/baseline/seed-{s}" for task in ("battle-of-sexes",
                                                                                "prisoners-dilemma")
                            for s in (1, 2, 3)]
    assert all(json.loads(text)["status"] == "submitted" for _, text in runs.values())
    # the live table (lines and the per-task table when stderr is not a terminal) and the summary
    assert "[6/6]" in proc.stderr and "mlgym/battle-of-sexes" in proc.stderr and "3/3" in proc.stderr
    assert "Scores per task" in proc.stdout and "baseline-agent" in proc.stdout
    score = run_cli("score", str(sweep), env=ENV)
    assert proc.stdout == score.stdout

    manifest = (sweep / "sweep.json").read_text()
    again = run_cli(*acceptance_args(data_dir), cwd=cwd, env=ENV, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stdout == score.stdout  # nothing but the summary
    assert again.stderr.strip() == ""
    assert results(sweep) == runs  # no episode ran again
    assert [e["event"] for e in events(sweep)].count("sweep_start") == 1
    assert (sweep / "sweep.json").read_text() == manifest


@pytest.mark.timeout(900)
def test_sigkill_halfway_then_rerun_gives_the_uninterrupted_summary(
        uninterrupted: dict[str, Any], data_dir: Path, tmp_path: Path) -> None:
    reference = uninterrupted["proc"]
    assert reference.returncode == 0, reference.stderr
    sweep = tmp_path / "killed"
    proc = start([*acceptance_args(data_dir), "--sweep-dir", str(sweep)], cwd=tmp_path)
    try:
        wait_for(lambda: sum(e["event"] == "cell_end" for e in events(sweep)) >= 2 or proc.poll() is not None,
                 600, "two finished episodes")
        assert proc.poll() is None, "the sweep ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    finished = results(sweep)
    assert 2 <= len(finished) < 6
    started_before = {e["cell"] for e in events(sweep) if e["event"] == "cell_start"}
    assert len(started_before) > len(finished)  # some episodes were cut short

    rerun = run_cli(*acceptance_args(data_dir), "--sweep-dir", str(sweep), cwd=tmp_path, env=ENV,
                    timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout == reference.stdout  # the same summary as the uninterrupted sweep
    after = results(sweep)
    assert len(after) == 6
    assert {k: after[k] for k in finished} == finished  # no finished episode lost or repeated
    second = events(sweep)[[e["event"] for e in events(sweep)].index("sweep_start", 1):]
    rerun_started = {e["cell"] for e in second if e["event"] == "cell_start"}
    assert not rerun_started & set(finished)
    retired = {e["cell"] for e in second if e["event"] == "cell_retired"}
    assert retired == started_before - set(finished)  # the cut attempts, moved aside and kept
    for cell in retired:
        (attempt,) = (sweep / ".sweep" / "attempts" / cell).iterdir()
        assert attempt.name.startswith("1-leftover")


@pytest.mark.timeout(900)
def test_ctrl_c_stops_cleanly_and_json_events_resume(tmp_path: Path) -> None:
    sweep = tmp_path / "stopped"
    args = ["sweep", "rgym/demo", "--agent", "react", "--model", "mock/baseline", "--agent-option",
            "latency_s=1", "--agent-option", "input_price=5", "--seeds", "1-3", "-j", "3", "--json",
            "--sweep-dir", str(sweep)]
    proc = start(args, cwd=tmp_path)
    try:
        wait_for(lambda: sum(e["event"] == "cell_step" for e in events(sweep)) >= 1 or proc.poll() is not None,
                 600, "a first step")
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lines = [json.loads(line) for line in out.splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[0] == "sweep_start" and "sweep_end" in kinds
    end = lines[kinds.index("sweep_end")]
    assert end["cancelled"] is True and end["stopped_by"] == "SIGINT" and end["exit_code"] == 130
    stopped = [e for e in lines if e["event"] == "cell_end"]
    assert stopped and all(e["outcome"] == "stopped" for e in stopped)
    assert all(e["status"] == "cancelled" for e in stopped if e.get("status"))

    again = run_cli(*args, cwd=tmp_path, env=ENV, timeout=600)
    assert again.returncode == 0, again.stderr
    lines = [json.loads(line) for line in again.stdout.splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[-1] == "summary" and kinds[-2] == "sweep_end"
    # the stopped cells go on where they stood (react resumes); one stopped before its
    # sandbox kept a workspace is moved aside and run again
    resumed = {e["cell"] for e in lines if e["event"] == "cell_resumed"}
    retired = {e["cell"] for e in lines if e["event"] == "cell_retired"}
    assert resumed and resumed | retired == {e["cell"] for e in stopped}
    ends = [e for e in lines if e["event"] == "cell_end"]
    assert len(ends) == 3 and all(e["outcome"] == "done" and e["score"] is not None for e in ends)
    assert all(e["cost_usd"] > 0 for e in ends)
    summary = lines[-1]["score"]
    assert [(s["solver"], s["runs"]) for s in summary["summaries"]] == [("react/mock_baseline", 3)]


def test_bad_cells_stop_the_sweep_before_anything_runs(tmp_path: Path) -> None:
    proc = run_cli("sweep", "rgym/demo", "--agent", "scripted,react", "--sweep-dir", str(tmp_path / "s"),
                   env=ENV)
    assert proc.returncode == 2
    assert "cannot start the sweep" in proc.stderr and "needs a model" in proc.stderr
    assert not (tmp_path / "s").exists()  # nothing left behind
    proc = run_cli("sweep", "nosuch/*", env=ENV, cwd=tmp_path)
    assert proc.returncode == 2 and "matches no installed task" in proc.stderr

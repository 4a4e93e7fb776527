"""Interrupted runs lose nothing: a run killed with SIGKILL is listed by `rgym score`
as incomplete and finished by `rgym grade`; the run directory is printed at the
start; the progress line's clock moves during a long step."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console

from conftest import REPO
from rgym_core.agents import EpisodeStatus
from rgym_core.grade_runs import finish_run
from rgym_core.grader_confinement import host_confinement
from rgym_core.progress import EpisodeProgress
from rgym_core.records import Action
from rgym_core.registry import load_registry
from rgym_core.rundir import RunDir, RunState
from rgym_core.runner import RunConfig, run_episode
from rgym_core.scoring import score_runs
from rgym_core.specs import Budget
from rgym_core.testing import run_cli


def _pids_matching(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_sigkilled_run_is_listed_incomplete_and_finished_by_rgym_grade(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = run_episode(RunConfig(task="rgym/demo", runs_dir=runs, seed=1, archive_workspace=False),
                       load_registry())
    assert done.status == "submitted"
    marker = f"sleep 120.{os.getpid()}7"  # unique: only this test's process matches it
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"tool": "bash", "args": {"command": "python baseline.py"}},
                                      {"tool": "bash", "args": {"command": marker}}]))
    proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--runs-dir",
                             str(runs), "--agent-option", f"script={script}", "--seed", "2"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: RunDir | None = None
    leftovers: list[Path] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and killed is None:
            if _pids_matching(marker):  # the long step runs
                killed = next(RunDir(t.parent) for t in runs.rglob("trajectory.jsonl")
                              if not (t.parent / "result.json").exists())
            time.sleep(0.05)
        assert killed is not None, "the long step never started"
        assert killed.state() is RunState.RUNNING
        assert [(p.path, p.state) for p in score_runs([runs]).pending] == [
            (str(killed.path), "running")]
        sandbox = next(r for r in killed.records() if r["type"] == "sandbox")
        if sandbox.get("host_workspace"):
            leftovers.append(Path(sandbox["host_workspace"]).parent)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        err = proc.stderr.read() if proc.stderr else ""
        assert f"run directory: {killed.path}" in err.replace("\n", "")  # printed at the start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _pids_matching(marker):  # the killed run's orphaned command
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not killed.result_path.exists()
    assert killed.state() is RunState.INCOMPLETE

    table = run_cli("score", str(runs))
    assert table.returncode == 0, table.stderr
    assert str(killed.path) in table.stdout.replace("\n", "") and "incomplete" in table.stdout
    assert [(p.path, p.state, p.task, p.steps) for p in score_runs([runs]).pending] == [
        (str(killed.path), "incomplete", "rgym/demo", 1)]

    graded = run_cli("grade", str(runs))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert f"graded: {killed.path}: autosubmitted_killed" in graded.stdout
    result = killed.result()
    assert result.status == "autosubmitted_killed" and result.end_reason == "killed"
    assert result.steps == 1 and result.final_scores is not None
    assert result.final_scores["r2"] > 0.8  # baseline.py ran before the kill
    assert killed.archive_path.is_file()
    # `rgym grade` says how it confined the grading it ran, even for a rebuilt result
    assert result.isolation is not None and result.isolation.agent == "none"
    assert result.isolation.grading == host_confinement().mode
    assert result.scores[-1].confined is not None
    kinds = [s.kind for s in result.scores]
    again = finish_run(killed.path, load_registry(), regrade=True)  # `rgym grade --regrade`
    assert again.action == "graded" and [s.kind for s in killed.result().scores] == kinds
    scored = score_runs([runs])
    assert scored.pending == []
    summary = {s.solver: s for s in scored.summaries}["scripted"]
    assert (summary.runs, summary.infra) == (1, 1)  # a killed run is an infrastructure failure
    for folder in leftovers:
        shutil.rmtree(folder, ignore_errors=True)


def test_progress_clock_moves_during_a_long_step() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    status = EpisodeStatus(budget=Budget(max_steps=5))
    progress = EpisodeProgress(console=console, out=Console(file=io.StringIO()),
                               refresh_per_second=20)
    with progress:
        progress.update("setup", {"run_dir": "/runs/x/y"})
        progress.update("action", {"index": 1, "action": Action.bash("python train.py"),
                                   "status": status})
        time.sleep(0.3)
        status.started_at -= 125  # two minutes pass inside the same step
        time.sleep(0.3)
    text = buffer.getvalue()
    assert "run directory: /runs/x/y" in text
    assert "step 1/5 · bash: python train.py · running · 0 s" in text
    assert "step 1/5 · bash: python train.py · running · 125 s" in text

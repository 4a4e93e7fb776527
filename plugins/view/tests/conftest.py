"""Fixtures of the viewer's tests: real episodes of ``rgym/demo`` run through the CLI
(an honest scripted run, one that submits before validating, one that repeats a
failing command five times, a react agent on the mock model in tools mode),
synthetic run directories written through ``rgym_core.rundir``, and one headless
Chromium for the whole session."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgym_core.records import Action, EpisodeResult, Observation, ScoreRecord, Step, Usage
from rgym_core.rundir import Owner, TrajectoryWriter, create_run_dir, write_config, write_result

SCRIPTS = {
    "honest": [
        {"tool": "bash", "args": {"command": "python baseline.py"}, "thought": "Run the baseline first."},
        {"tool": "validate", "thought": "Check its score."},
        {"tool": "submit"},
    ],
    "premature": [
        {"tool": "bash", "args": {"command": "python baseline.py"}},
        {"tool": "submit"},
    ],
    "loop": [
        *[{"tool": "bash", "args": {"command": "python train.py --epochs 3"}} for _ in range(5)],
        {"tool": "bash", "args": {"command": "python baseline.py"}},
        {"tool": "validate"},
        {"tool": "submit"},
    ],
}
REACT_REPLIES = ["seq 1 400", "python baseline.py", "validate", "submit"]


def rgym(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``rgym ARGS`` as a user types it (the console script of this interpreter)."""
    exe = Path(sys.executable).with_name("rgym")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "rgym_core.cli"]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four finished episodes of rgym/demo under one runs folder: name -> run dir."""
    root = tmp_path_factory.mktemp("demo-runs")
    runs = root / "runs"
    out: dict[str, Path] = {}
    for name, script in SCRIPTS.items():
        path = root / f"{name}.json"
        path.write_text(json.dumps(script))
        proc = rgym("run", "rgym/demo", "--agent", "scripted", "--agent-option", f"script={path}",
                    "--runs-dir", str(runs), "--tag", f"scenario={name}", "--json", cwd=root)
        assert proc.returncode == 0, proc.stderr
        out[name] = Path(json.loads(proc.stdout)["run_dir"])
    proc = rgym("run", "rgym/demo", "--agent", "react", "--model", "mock/script",
                "--agent-option", "mode=tools", "--agent-option", f"replies={json.dumps(REACT_REPLIES)}",
                "--runs-dir", str(runs), "--tag", "scenario=react", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    out["react"] = Path(json.loads(proc.stdout)["run_dir"])
    for name, path in out.items():
        if not path.is_absolute():
            out[name] = root / path
    return out


@pytest.fixture(scope="session")
def runs_folder(demo_runs: dict[str, Path]) -> Path:
    """The runs folder holding the demo runs (``runs/``)."""
    return Path(os.path.commonpath([str(p) for p in demo_runs.values()]))


# --------------------------------------------------------------------------- synthetic runs


def make_run(path: Path, steps: list[dict[str, Any]], *, task: str = "synthetic/task",
             agent: str = "fixture/agent", model: str | None = "fixture/model",
             status: str | None = "submitted", final: dict[str, float] | None = None,
             gradings: list[dict[str, Any]] | None = None, end_reason: str = "submit",
             budget: dict[str, Any] | None = None, started_at: float | None = None,
             extras: dict[str, Any] | None = None, live: bool = False,
             tools: list[str] | None = None,
             extra_records: list[tuple[str, dict[str, Any]]] | None = None) -> Path:
    """A run directory written through rundir's writers.  Each step: ``tool``,
    ``args``, ``output``, optional ``exit_code``, ``error``, ``duration``, ``info``,
    ``thought``, ``tokens`` (in, out), ``cost``.  ``status=None`` leaves it without a
    result: a killed run (its owner process is gone), or a running one with ``live``
    (owned by this process).  ``tools``: the start record's tools; ``extra_records``: more
    ``(type, fields)`` records written after the steps (``processes_killed``...)."""
    started_at = started_at or time.time() - 3600
    create_run_dir(path)
    budget = budget or {"max_steps": 50, "time_limit_s": 3600.0, "action_timeout_s": 60.0,
                        "cost_limit_usd": None, "token_limit": None}
    metrics = [{"name": "accuracy", "direction": "maximize", "primary": True}]
    write_config(path, {"run_id": path.name, "run": {"task": task, "agent": agent, "model": model, "seed": 1,
                                                     "tags": {}},
                        "budget": budget, "task": {"id": task, "description": "Classify things.",
                                                   "metrics": metrics,
                                                   "baseline": {"scores": {"accuracy": 0.5}}},
                        "agent": agent},
                 owner=None if live or status is not None else Owner(host=socket.gethostname(), pid=4_000_000,
                                                                     identity="gone"))
    records: list[ScoreRecord] = []
    elapsed = 0.0
    with TrajectoryWriter(path) as writer:
        writer.write("start", {"run_id": path.name, "task": task, "agent": agent, "model": model,
                               "started_at": started_at,
                               "tools": tools or ["rgym/bash", "rgym/edit", "rgym/validate", "rgym/submit"]})
        for i, spec in enumerate(steps, start=1):
            tin, tout = spec.get("tokens", (0, 0))
            action = Action(tool=spec["tool"], args=spec.get("args", {}), thought=spec.get("thought"),
                            usage=Usage(cost_usd=spec.get("cost", 0.0), input_tokens=tin, output_tokens=tout,
                                        calls=1 if tin else 0))
            obs = Observation(output=spec.get("output", ""), error=spec.get("error", False),
                              exit_code=spec.get("exit_code"), info=spec.get("info", {}),
                              score=spec.get("score"))
            duration = spec.get("duration", 0.5)
            writer.step(Step(index=i, action=action, observation=obs, started_at=started_at + elapsed,
                             duration_s=duration, elapsed_s=elapsed))
            elapsed += duration + 1.0
        for kind, fields in extra_records or []:
            writer.write(kind, fields)
        for g in gradings or []:
            record = ScoreRecord(step=g["step"], kind=g.get("kind", "validate"), valid=g.get("valid", True),
                                 scores=g.get("scores", {}), error=g.get("error"))
            records.append(record)
            writer.score(record)
        if status is not None:
            result = EpisodeResult(run_id=path.name, task_id=task, agent=agent, model=model, status=status,
                                   seed=1, scores=records, final_scores=final, primary_metric="accuracy",
                                   metrics={"accuracy": "maximize"}, baseline_scores={"accuracy": 0.5},
                                   steps=len(steps), started_at=started_at, ended_at=started_at + elapsed,
                                   duration_s=elapsed, end_reason=end_reason,
                                   cost_usd=sum(s.get("cost", 0.0) for s in steps),
                                   input_tokens=sum(s.get("tokens", (0, 0))[0] for s in steps),
                                   output_tokens=sum(s.get("tokens", (0, 0))[1] for s in steps),
                                   extras=extras or {})
            writer.end(result)
            write_result(path, result)
    return path


# --------------------------------------------------------------------------- the browser

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage", "--window-size=1400,1000"]


@pytest.fixture(scope="session")
def browser() -> Any:
    """One headless Chromium (Debian's, through chromedriver) for the session."""
    from selenium import webdriver  # a test dependency: pip install -e plugins/view[test]
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.fail("chromium and chromedriver are needed: .ci/setup.d/50-view.sh installs them")
    options = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.binary_location = binary
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()

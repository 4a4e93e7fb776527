"""`rgym export inspect`: the `.eval` logs it writes are read back by Inspect AI's own
reader (the real `inspect-ai` package) with the same steps, messages, tool calls,
scores and usage as the run directories they came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import EvalLog, read_eval_log, read_eval_log_sample_summaries

from conftest import make_run, rgym
from rgym_core.rundir import RunDir


def export(paths: list[Path], out: Path, cwd: Path) -> dict[str, Path]:
    """``rgym export inspect PATHS -o OUT --json``: run dir name -> log."""
    proc = rgym("export", "inspect", *map(str, paths), "-o", str(out), "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return {Path(item["run_dir"]).name: Path(item["log"]) for item in json.loads(proc.stdout)}


def steps_of(run: Path) -> list[dict[str, Any]]:
    return [r["step"] for r in RunDir(run).records() if r.get("type") == "step"]


def tool_messages(log: EvalLog) -> list[Any]:
    assert log.samples is not None and len(log.samples) == 1
    return [m for m in log.samples[0].messages if m.role == "tool"]


@pytest.fixture(scope="module")
def exported(demo_runs: dict[str, Path], runs_folder: Path,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, EvalLog]:
    out = tmp_path_factory.mktemp("inspect-logs")
    logs = export([runs_folder], out, cwd=out)
    assert len(logs) == len(demo_runs)
    return {name: read_eval_log(str(logs[run.name])) for name, run in demo_runs.items()}


def test_every_exported_run_reads_back_with_its_steps_and_final_score(
        exported: dict[str, EvalLog], demo_runs: dict[str, Path]) -> None:
    for name, log in exported.items():
        run = RunDir(demo_runs[name])
        result = run.result()
        steps = steps_of(run.path)
        assert log.status == "success"
        assert log.eval.task == "rgym/rgym/demo"  # the whole name under rgym's namespace
        assert log.eval.config.epochs == 1 and log.samples[0].metadata["rgym_run_id"] == result.run_id
        # the same number of steps: one tool call and one tool result per step, in order
        tools = tool_messages(log)
        assert len(tools) == len(steps) == result.steps, name
        assert [m.function for m in tools] == [s["action"]["tool"] for s in steps]
        assert [m.text for m in tools] == [s["observation"]["output"] for s in steps]
        calls = [c for m in log.samples[0].messages if m.role == "assistant" for c in (m.tool_calls or [])]
        assert [c.id for c in calls] == [m.tool_call_id for m in tools]
        assert len([e for e in log.samples[0].events if e.event == "tool"]) == len(steps)
        # the same final score: the sample's score and the eval's metrics
        assert result.final_scores
        score = log.samples[0].scores["rgym"]
        assert score.value == pytest.approx(result.final_scores)
        assert score.explanation == "submitted"
        assert score.metadata["primary_metric"] == result.primary_metric == "r2"
        # one EvalScore per metric (the primary first), its mean over the epochs: here the one run
        assert log.results.scores[0].name == "r2"
        assert {s.name: s.metrics["mean"].value for s in log.results.scores} == pytest.approx(result.final_scores)
        # the validations are intermediate score events; the final grading is not
        scores = [e for e in log.samples[0].events if e.event == "score"]
        assert [e.intermediate for e in scores] == [g.kind == "validate" for g in result.scores]
    honest = exported["honest"]
    bash = next(c for m in honest.samples[0].messages if m.role == "assistant" for c in (m.tool_calls or []))
    assert bash.arguments == {"command": "python baseline.py"}
    assert honest.samples[0].messages[1].text == "Run the baseline first."  # the step's thought


def test_a_model_run_keeps_its_conversation_tool_calls_and_usage(
        exported: dict[str, EvalLog], demo_runs: dict[str, Path]) -> None:
    log = exported["react"]
    run = RunDir(demo_runs["react"])
    result = run.result()
    sample = log.samples[0]
    assert log.eval.model == "mock/script" and log.eval.solver == result.agent
    assert [m.role for m in sample.messages[:2]] == ["system", "user"]
    assert "TASK DESCRIPTION" in sample.messages[1].text
    calls = [c for s in steps_of(run.path) for c in s["action"]["llm_calls"]]
    models = [e for e in sample.events if e.event == "model"]
    assert len(models) == len(calls) == 4
    # the model saw the conversation so far: its input grows call after call
    assert [m.role for m in models[0].input] == ["system", "user"]
    assert len(models[-1].input) > len(models[0].input)
    assert models[0].output.choices[0].message.tool_calls[0].arguments == {"command": "seq 1 400"}
    assert [e.output.usage.input_tokens for e in models] == [c["input_tokens"] for c in calls]
    usage = sample.model_usage["mock/script"]
    assert (usage.input_tokens, usage.output_tokens) == (result.input_tokens, result.output_tokens)
    assert log.stats.model_usage["mock/script"].total_tokens == result.input_tokens + result.output_tokens
    # what `inspect view` lists: the header and the sample summaries
    header = read_eval_log(str(next(iter(Path(log.location).parent.glob(f"*{result.run_id}.eval")))),
                           header_only=True)
    assert header.samples is None and header.results.scores[0].metrics["mean"].value == pytest.approx(
        result.final_scores["r2"])
    summaries = read_eval_log_sample_summaries(log.location)
    assert len(summaries) == 1 and summaries[0].message_count == len(sample.messages)


def test_budgets_timeouts_errors_and_unfinished_runs_map_to_inspects_fields(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    timed_out = {"tool": "bash", "args": {"command": "python train.py"}, "exit_code": 124, "error": True,
                 "output": "still training", "info": {"timed_out": True}, "tokens": (1200, 30), "cost": 0.01}
    make_run(runs / "out-of-steps", [timed_out] * 3, status="autosubmitted_max_steps", end_reason="max_steps",
             final={"accuracy": 0.55},
             budget={"max_steps": 3, "time_limit_s": 3600.0, "action_timeout_s": 60.0, "cost_limit_usd": None,
                     "token_limit": None},
             gradings=[{"step": 3, "kind": "autosubmit", "scores": {"accuracy": 0.55}}])
    make_run(runs / "broken", [{"tool": "submit", "output": "submitted"}], status="evaluation_error",
             final=None, gradings=[{"step": 1, "kind": "submit", "valid": False, "error": "no id column"}])
    make_run(runs / "killed", [{"tool": "bash", "args": {"command": "ls"}, "output": "a\n", "exit_code": 0}],
             status=None)
    logs = export([runs], tmp_path / "logs", cwd=tmp_path)
    assert set(logs) == {"out-of-steps", "broken", "killed"}

    log = read_eval_log(str(logs["out-of-steps"]))
    sample = log.samples[0]
    assert sample.limit is not None and sample.limit.type == "message" and sample.limit.limit == 3
    tools = tool_messages(log)
    assert len(tools) == 3 and all(m.error is not None and m.error.type == "timeout" for m in tools)
    assert sample.scores["rgym"].value == {"accuracy": 0.55}
    assert sample.scores["rgym"].explanation == "autosubmitted_max_steps"
    usage = next(iter(sample.model_usage.values()))
    assert (usage.input_tokens, usage.output_tokens) == (3600, 90)
    assert usage.total_cost == pytest.approx(0.03)

    log = read_eval_log(str(logs["broken"]))
    assert log.samples[0].scores["rgym"].value == "invalid"
    assert "evaluation_error" in log.samples[0].scores["rgym"].explanation
    assert log.results.scores[0].scored_samples == 0

    log = read_eval_log(str(logs["killed"]))  # no result: the run died; its steps are still there
    assert log.status == "error"
    assert len(tool_messages(log)) == 1


def test_export_errors_name_the_path(tmp_path: Path) -> None:
    proc = rgym("export", "inspect", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode != 0 and "nowhere: no such file or directory" in proc.stderr


def test_inspect_view_shows_an_exported_run(browser: Any, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    """Inspect's own viewer (`inspect view`, served on loopback) opened in headless Chromium."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    logs = tmp_path / "logs"
    export([demo_runs["react"]], logs, cwd=tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("inspect")
    assert exe.exists(), "inspect-ai's console script is missing: pip install -e plugins/view[test]"
    proc = subprocess.Popen([str(exe), "view", "--log-dir", str(logs), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HOME": str(tmp_path)})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read(1)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "inspect view did not start"
                time.sleep(0.5)
        browser.get(f"http://127.0.0.1:{port}/")
        body = WebDriverWait(browser, 60, poll_frequency=0.2).until(
            lambda d: (t := d.find_element(By.TAG_NAME, "body").text) and "MODEL CALL" in t.upper() and t)
        browser.save_screenshot(str(tmp_path / "inspect-view.png"))
        assert "rgym/demo" in body and "mock/script" in body
        assert "0.872" in body  # the final r2
        assert "TASK DESCRIPTION" in body
    finally:
        proc.terminate()
        proc.wait(timeout=30)

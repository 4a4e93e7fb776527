"""Forged model-call records (issue "One submission", item 5).

``forger_agent/`` is a scaffold published as its own package (``rgym-agent-forger``)
that makes a known number of real model calls and then reports, in its action's
``llm_calls`` and ``usage`` (or on the ``AgentFormatError`` it raises), two invented
models with 250 and 180 input tokens and its real calls inflated to 10,000 tokens.
With ``--agent-isolation process`` only the calls the runner proxied count: the
trajectory's ``llm_calls``, ``result.json``'s tokens and cost, the Inspect export
(``rgym export inspect``) and the viewer's data (``rgym view``) show those and
nothing the scaffold claimed.  Everything runs as a user would: ``rgym`` subprocesses
in a throwaway environment holding the scaffold.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.testing.venvs import ChildEnv, clean_env

FORGER = Path(__file__).resolve().parent / "forger_agent"
INVENTED = ("gpt-imaginary-9", "claude-invented")
MODEL = "mock/submit"


@pytest.fixture(scope="module")
def forger_env() -> Iterator[ChildEnv]:
    """A virtual environment holding ``rgym-agent-forger`` (readable by the agent's uid)."""
    with ChildEnv.temporary(prefix="rgym-forger-") as env:
        src = env.root.parent / "src"
        shutil.copytree(FORGER, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        env.pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(src))
        yield env


def rgym(env: ChildEnv, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(env.python), "-m", "rgym_core.cli", *args], capture_output=True, text=True,
                          env=clean_env(), cwd=cwd, timeout=240)


def forged_run(env: ChildEnv, runs: Path, *options: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    extra = [x for opt in options for x in ("--agent-option", opt)]
    done = rgym(env, "run", "rgym/demo", "--agent", "forger", "--model", MODEL, "--agent-isolation",
                "process", "--agent-option", "input_price=1000", "--agent-option", "output_price=2000",
                *extra, "--runs-dir", str(runs), "--json", cwd=runs.parent)
    assert done.stdout.strip(), done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result.get("run_dir"), (result, done.stderr[-3000:])
    records = [json.loads(line) for line in
               (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines() if line.strip()]
    return result, records


def recorded_calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every model call the trajectory records: on steps and on an agent's stop."""
    calls = [c for r in records if r["type"] == "step" for c in r["step"]["action"]["llm_calls"]]
    return calls + [c for r in records if r["type"] == "agent_stop" for c in r.get("llm_calls") or []]


def viewer_data(env: ChildEnv, runs: Path, tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(meta, trajectories)`` of the page ``rgym view --no-compress`` writes."""
    page = tmp_path / "view.html"
    done = rgym(env, "view", str(runs), "-o", str(page), "--no-compress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    html = page.read_text()
    meta = json.loads(re.search(r'<script type="application/json" id="rgym-meta">(.*?)</script>', html,
                                re.S).group(1))  # type: ignore[union-attr]
    trajectories = [json.loads(m) for m in re.findall(
        r'<script type="application/octet-stream" id="traj-\d+" data-encoding="json">(.*?)</script>', html,
        re.S)]
    return meta, trajectories


def inspect_logs(env: ChildEnv, runs: Path, tmp_path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(header, sample)`` of every log ``rgym export inspect`` writes."""
    out = tmp_path / "logs"
    done = rgym(env, "export", "inspect", str(runs), "-o", str(out), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    from inspect_ai.log import read_eval_log  # Inspect's own reader (its logs may be zstd)

    logs = []
    for item in json.loads(done.stdout):
        log = read_eval_log(item["log"])
        header = log.model_dump(mode="json", exclude={"samples"})
        (sample,) = [x for x in log.samples or [] if x.epoch == item["epoch"]]
        logs.append((header, sample.model_dump(mode="json")))
    return logs


def test_a_scaffold_s_forged_model_calls_count_nowhere(forger_env: ChildEnv, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    real, real_records = forged_run(forger_env, runs, "calls=2")
    stopped, stop_records = forged_run(forger_env, runs, "calls=1", "stop=format_error")
    assert real["end_reason"] == "submit", (real.get("error"), real.get("agent_error"))
    assert stopped["end_reason"] == "format_error", stopped

    # the trajectory: the two calls the runner made, with the runner's counts
    calls = recorded_calls(real_records)
    assert [c["model"] for c in calls] == [MODEL.split("/", 1)[1]] * 2 or \
        [c["model"] for c in calls] == [MODEL] * 2, calls
    assert all(c["input_tokens"] < 10_000 and c["output_tokens"] < 10_000 for c in calls), calls
    assert real["input_tokens"] == sum(c["input_tokens"] for c in calls) > 0
    assert real["output_tokens"] == sum(c["output_tokens"] for c in calls) > 0
    assert real["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls), abs=1e-6)
    assert 0 < real["cost_usd"] < 1.0
    # the stopped run made one call: the agent's stop records it, with the runner's counts
    [stop_call] = recorded_calls(stop_records)
    assert stop_call["recorded_by"] == "runner" and stop_call["input_tokens"] < 10_000, stop_call
    assert (stopped["input_tokens"], stopped["output_tokens"]) == \
        (stop_call["input_tokens"], stop_call["output_tokens"])
    assert stopped["cost_usd"] == pytest.approx(stop_call["cost_usd"], abs=1e-6) and stopped["cost_usd"] < 1
    for record in real_records + stop_records:
        assert not any(name in json.dumps(record) for name in INVENTED), record
    # what the scaffold claimed is only noted, labelled, in the agent process's log
    for result in (real, stopped):
        log = (Path(result["run_dir"]) / "agent_process.log").read_text()
        assert "reported by the scaffold, unverified, not counted" in log and "gpt-imaginary-9" in log
    assert not (Path(real["run_dir"]) / "result.json").read_text().count("imaginary")

    # the Inspect export: model usage and model events are the proxied calls only
    logs = inspect_logs(forger_env, runs, tmp_path)
    assert len(logs) == 2
    by_run = {sample["metadata"]["rgym_run_id"]: (header, sample) for header, sample in logs}
    header, sample = by_run[real["run_id"]]
    usage = sample["model_usage"]
    assert list(usage) == [MODEL], usage
    assert usage[MODEL]["input_tokens"] == real["input_tokens"]
    assert usage[MODEL]["output_tokens"] == real["output_tokens"]
    assert header["stats"]["model_usage"] == usage
    assert len([e for e in sample["events"] if e["event"] == "model"]) == 2
    header, sample = by_run[stopped["run_id"]]  # its one call was made outside a step
    assert list(sample["model_usage"]) == [MODEL]
    assert sample["model_usage"][MODEL]["input_tokens"] == stopped["input_tokens"]
    for header, sample in logs:
        assert not any(name in json.dumps([header, sample]) for name in INVENTED)

    # the viewer: per-step model calls, events and the run list show the runner's figures
    meta, trajectories = viewer_data(forger_env, runs, tmp_path)
    rows = {row["run_id"]: row for row in meta["runs"]}
    assert rows[real["run_id"]]["input_tokens"] == real["input_tokens"]
    assert rows[stopped["run_id"]]["input_tokens"] == stopped["input_tokens"]
    shown = [m for t in trajectories for s in t["steps"] for m in s.get("m", [])]
    assert len(shown) == 2 and all(m[1] < 10_000 for m in shown), shown
    assert not any(name in json.dumps(trajectories) for name in INVENTED)

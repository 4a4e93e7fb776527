"""researchgym/improving-replay-buffers end to end: the cpu baseline reproducing its
recorded score, the hand-written JSON record that fooled ResearchGym's grader getting no
score, a hostile agent reaching neither the simulator nor the grader, and an edited task
directory refused with both tree hashes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

TASK = "researchgym/improving-replay-buffers"
PACK = Path(__file__).resolve().parents[1]
TASK_DIR = PACK / "rgym_task_replay" / "tasks" / "improving-replay-buffers"
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", PACK.parents[1] / ".." / "shared" / "data")) / "researchgym"
ARCHIVES = sorted(DATA.glob("*.tar.gz"))
#: Episodes train and grade for real: minutes on a loaded 2-core machine.
slow = pytest.mark.timeout(1200)
needs_data = pytest.mark.skipif(not ARCHIVES, reason=f"no ResearchGym archive in {DATA} (set RGYM_TEST_DATA_DIR)")
RGYM = [sys.executable, "-c", "from rgym_core.cli import main; main()"]


def recorded_baseline() -> dict[str, float]:
    return yaml.safe_load((TASK_DIR / "task.yaml").read_text())["profiles"]["cpu"]["baseline"]["scores"]


def baseline_tolerances() -> dict[str, float]:
    """The recorded spread over grader secrets (the evaluation seeds are per machine)."""
    return yaml.safe_load((TASK_DIR / "task.yaml").read_text())["profiles"]["cpu"]["baseline"]["tolerances"]


def rgym_run(tmp_path: Path, *args: str) -> dict:
    runs = tmp_path / "runs"
    proc = subprocess.run([*RGYM, "run", TASK, "--profile", "cpu", "--runs-dir", str(runs),
                           "--data-dir", str(DATA), *args],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    results = list(runs.rglob("result.json"))
    assert results, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(results[0].read_text())


def scripted(tmp_path: Path, *commands: str) -> dict:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([*({"tool": "bash", "args": {"command": c}} for c in commands),
                                      {"tool": "submit"}]))
    return rgym_run(tmp_path, "--agent", "scripted", "--agent-option", f"script={script}")


def write_file(name: str, text: str) -> str:
    return f"cat > {name} <<'RGYM_END'\n{text}\nRGYM_END"


def test_protocol_counts_interactions_and_sums_returns() -> None:
    pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    path = TASK_DIR / "overlay" / "rgym_rl_protocol.py"
    spec = importlib.util.spec_from_file_location("rgym_rl_protocol", path)
    assert spec is not None and spec.loader is not None
    protocol = importlib.util.module_from_spec(spec)
    sys.modules["rgym_rl_protocol"] = protocol
    spec.loader.exec_module(protocol)
    counts = {"act": 0, "observe": 0}

    def zero_agent(message: dict, timeout: float) -> dict:
        op = message["op"]
        counts[op] = counts.get(op, 0) + 1
        return {"ok": True, "action": [0.0, 0.0, 0.0]} if op == "act" else {"ok": True}
    setup = protocol.Protocol(train_steps=50, eval_episodes=2, seeds=[0])
    result = protocol.run_seed(zero_agent, setup, 0, "cpu")
    assert counts["observe"] == 50  # exactly the budget, never more
    # one act per training step, per evaluation step, and per step of the pre-training episode
    assert counts["act"] > 50 + sum(result.eval_lengths)
    assert result.average_return == pytest.approx(sum(result.eval_returns) / 2)
    assert result.initial_return is not None and result.initial_return > 0

    with pytest.raises(protocol.AgentError, match="3 finite numbers"):
        protocol.run_seed(lambda m, t: {"ok": True, "action": [float("nan")] * 3}, setup, 0, "cpu")
    with pytest.raises(protocol.AgentError, match="make_agent failed"):
        protocol.run_seed(lambda m, t: {"ok": False, "error": "boom"}, setup, 0, "cpu")


@needs_data
@slow
def test_cpu_baseline_reproduces_recorded_score(tmp_path: Path) -> None:
    result = rgym_run(tmp_path, "--agent", "baseline")
    assert result["status"] == "submitted", result.get("error")
    tolerances = baseline_tolerances()  # the evaluation seeds are per machine (a grader secret)
    for metric, recorded in recorded_baseline().items():
        assert abs(result["final_scores"][metric] - recorded) <= tolerances[metric], (metric, result["final_scores"])
    from rgym_integrity import integrity_problems

    assert integrity_problems(tmp_path) == []  # the task's own starter is no attack
    final = result["scores"][-1]
    assert final["confined"] is not False
    assert final["details"]["train_steps"] == 1000
    assert all(s["initial_return"] < 100 for s in final["details"]["seeds"])
    workspace = subprocess.run(["tar", "tzf", next(tmp_path.rglob("workspace.tar.gz"))],
                               capture_output=True, text=True, check=True).stdout.split()
    assert not any(p.startswith(("workspace/grading", "workspace/idea_hint", "workspace/blocked_urls",
                                 "workspace/install.sh")) for p in workspace)
    assert "workspace/rgym_agent.py" in workspace and "workspace/synther/online/online.py" in workspace


FORGED = ('[{"environment": "Hopper-v2", "category": "gym", "seed": 0, "metrics": {"average_return": 3601.0}},'
          ' {"environment": "Hopper-v2", "category": "gym", "seed": 1, "metrics": {"average_return": 3601.0}}]')


@needs_data
@slow
def test_forged_json_records_get_no_score(tmp_path: Path) -> None:
    """The logs/**/*.json record that ResearchGym's grade.py averaged into "Hopper 3601" is
    never read: without an agent there is no score."""
    forge = (f"mkdir -p logs/pgr && echo '{FORGED}' > logs/pgr/hopper.json && "
             "echo '{\"hopper\": 3601}' > grading_summary.json && rm rgym_agent.py")
    result = scripted(tmp_path, forge)
    assert result["status"] == "submission_missing"
    assert not result.get("final_scores")


HOSTILE = '''
"""Tries to load a simulator (free interactions), to read the grader's files and to
write the score file; raises if anything worked, else stands still."""
import glob
import numpy as np

def make_agent(spec):
    hits = []
    for module in ("gymnasium", "mujoco", "gym", "dm_control"):
        try:
            __import__(module)
            hits.append("imported " + module)
        except ImportError:
            pass
    for pattern in ["/tmp/rgym-eval-*/grader/*.py", "/eval/grader/*.py", "/eval/scores.json",
                    "/tmp/rgym-eval-*/scores.json"]:
        if glob.glob(pattern):
            hits.append(pattern)
    for path in glob.glob("/tmp/rgym-eval-*/scores.json") + ["/eval/scores.json"]:
        try:
            with open(path, "w") as fh:
                fh.write('{"scores": {"average_return": 9999}}')
            hits.append("wrote " + path)
        except OSError:
            pass
    if hits:
        raise RuntimeError("ATTACK SUCCEEDED: " + ", ".join(hits))
    return StandStill(spec["act_dim"])

class StandStill:
    def __init__(self, act_dim):
        self.act_dim = act_dim
    def act(self, obs, deterministic):
        return np.zeros(self.act_dim)
    def observe(self, obs, action, reward, next_obs, terminated, truncated):
        pass
'''


@needs_data
@slow
def test_hostile_agent_reaches_neither_simulator_nor_grader(tmp_path: Path) -> None:
    result = scripted(tmp_path, write_file("rgym_agent.py", HOSTILE))
    assert "ATTACK SUCCEEDED" not in json.dumps(result)
    assert result["status"] == "submitted", result.get("error")
    assert 0 < result["final_scores"]["average_return"] < 1000


@needs_data
@slow
def test_edited_task_directory_is_refused_with_both_hashes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with tarfile.open(ARCHIVES[0]) as tar:
        members = [m for m in tar.getmembers() if "/tasks/test/improving-replay-buffers/" in m.name + "/"]
        tar.extractall(data, members=members, filter="data")
    task_dir = next(data.rglob("improving-replay-buffers"))
    (task_dir / "grading" / "grade.py").write_text("print('{\"average_return\": 3601}')\n")
    runs = tmp_path / "runs"
    proc = subprocess.run([*RGYM, "run", TASK, "--profile", "cpu", "--agent", "baseline",
                           "--runs-dir", str(runs), "--data-dir", str(data)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "RGYM_CACHE_DIR": str(tmp_path / "cache")})
    output = proc.stdout + proc.stderr
    pinned = "a82f5a2d3dec1657237748d7e5619bb07c0d9322"
    assert proc.returncode != 0 and pinned in output, output
    assert re.search(rf"\b(?!{pinned})[0-9a-f]{{40}}\b", output), output
    assert "grading/grade.py" in output
    assert not list(runs.rglob("result.json"))

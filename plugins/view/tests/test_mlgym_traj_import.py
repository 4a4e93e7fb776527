"""``rgym import mlgym-traj``: MLGym's ``.traj`` trajectories become run folders
that ``rgym score``, ``rgym view`` and ``rgym analyze`` read.

The fixtures (``fixtures/mlgym/``) are small hand-written files in the format of
MLGym's agent (``mlgym/agent/base.py`` ``save_trajectory``; ``mlgym/types.py``
``TrajectoryStep``, ``AgentInfo``; ``mlgym/backend/base.py`` ``APIStats``), in
MLGym's folder layout ``<model>__<task id>__<config>__...__run_<n>/<task id>.traj``
beside ``results.json``: two episodes of prisonersDilemma (one submitted after two
validations, one autosubmitted when the steps ran out) and one of 3SATTime that
hit the cost limit without a submission.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import rgym

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mlgym"
PD0 = "metagen-gpt4o2__prisonersDilemma__default__t-0.00__p-0.95__c-4.00__install-0__parallel_agents_run_0"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mlgym")
    proc = rgym("import", "mlgym-traj", str(FIXTURES), "--runs-dir", "runs", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    assert len(written) == 3
    return root


def _runs(root: Path) -> dict[str, Path]:
    out = {}
    for result in (root / "runs").rglob("result.json"):
        data = json.loads(result.read_text())
        out[f"{data['task_id']}#{data['seed']}"] = result.parent
    return out


def test_each_file_becomes_a_run_folder(imported):
    runs = _runs(imported)
    assert set(runs) == {"mlgym/prisoners-dilemma#0", "mlgym/prisoners-dilemma#1", "mlgym/3sat#0"}
    submitted = json.loads((runs["mlgym/prisoners-dilemma#0"] / "result.json").read_text())
    assert submitted["status"] == "submitted" and submitted["end_reason"] == "submit"
    assert submitted["model"] == "metagen-gpt4o2" and submitted["profile"] == "mlgym"
    assert (submitted["cost_usd"], submitted["input_tokens"], submitted["output_tokens"]) == (0.21, 48210, 2210)
    assert [(s["kind"], s["step"], s["scores"]) for s in submitted["scores"]] == [
        ("validate", 4, {"Score": 2.41}), ("validate", 6, {"Score": 2.45}), ("submit", 7, {"Score": 2.4512})]
    assert submitted["final_scores"] == {"Score": 2.4512} and submitted["primary_metric"] == "Score"
    assert submitted["baseline_scores"] == {"Score": 2.3716}  # MLGym's results.json beside the file
    auto = json.loads((runs["mlgym/prisoners-dilemma#1"] / "result.json").read_text())
    assert auto["status"] == "autosubmitted_max_steps" and auto["final_scores"] == {"Score": 2.31}
    sat = json.loads((runs["mlgym/3sat#0"] / "result.json").read_text())
    assert sat["status"] == "submission_missing" and sat["end_reason"] == "cost"
    assert sat["direction"] == "minimize" and sat["final_scores"] is None  # the installed task's metric
    config = json.loads((runs["mlgym/prisoners-dilemma#0"] / "config.json").read_text())
    assert config["source"]["format"] == "mlgym-traj"
    assert config["source"]["path"] == str(FIXTURES / PD0 / "prisonersDilemma.traj")
    lines = [json.loads(x) for x in (runs["mlgym/prisoners-dilemma#0"] / "trajectory.jsonl").read_text().splitlines()]
    steps = [x["step"] for x in lines if x["type"] == "step"]
    assert [s["action"]["tool"] for s in steps] == ["bash", "open", "edit", "validate", "edit", "validate", "submit"]
    assert steps[2]["action"]["thought"].startswith("DISCUSSION\nTit for tat")
    assert steps[0]["action"]["llm_calls"][0]["messages"][0]["role"] == "system"  # the first prompt
    assert steps[3]["observation"]["score"] == {"Score": 2.41}


def test_rgym_score_reads_them(imported):
    proc = rgym("score", "runs", "--format", "json", cwd=imported)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    summaries = {(s["task"], s["solver"]): s for s in data["summaries"]}
    pd = summaries[("mlgym/prisoners-dilemma", "mlgym-agent/metagen-gpt4o2")]
    assert (pd["runs"], pd["failed"], pd["best_at_k"], pd["last_at_k"]) == (2, 0, 2.4512, 2.4512)
    assert pd["best_mean"] == pytest.approx((2.4512 + 2.33) / 2) and pd["best_se"] is not None
    sat = summaries[("mlgym/3sat", "mlgym-agent/metagen-gpt4o2")]
    assert (sat["runs"], sat["failed"], sat["best_at_k"]) == (1, 1, None)


def test_rgym_view_and_analyze_read_them(imported):
    view = rgym("view", "runs", "-o", "view.html", cwd=imported)
    assert view.returncode == 0, view.stderr
    assert "3 runs" in view.stdout and "broken" not in view.stdout + view.stderr
    page = (imported / "view.html").read_text()
    assert "mlgym/prisoners-dilemma" in page
    analysis = rgym("analyze", "runs", "--json", "--no-plots", cwd=imported)
    assert analysis.returncode == 0, analysis.stderr
    data = json.loads(analysis.stdout)
    groups = {g["task"]: g for g in data["groups"]}
    pd = groups["mlgym/prisoners-dilemma@mlgym"]
    assert pd["runs"] == 2 and pd["steps"] == 11
    assert pd["actions"]["validate"] == 3 and pd["actions"]["edit"] == 2 and pd["actions"]["submit"] == 1
    assert pd["statuses"] == {"submitted": 1, "autosubmitted_max_steps": 1}
    assert not [r for r in data["runs"] if r.get("problem")]


def test_importing_the_same_file_again_names_the_folder(imported):
    proc = rgym("import", "mlgym-traj", str(FIXTURES / PD0), "--runs-dir", "runs", cwd=imported)
    assert proc.returncode == 2
    assert "already imported as runs/mlgym__prisoners-dilemma@mlgym/" in proc.stderr


@pytest.mark.parametrize(("content", "field", "fix"), [
    ("{not json", "line 1 column 2", "MLGym's agent writes"),
    (json.dumps({"history": [], "info": {}}), "trajectory: missing", "a list of steps"),
    (json.dumps({"trajectory": [{"action": "ls"}, {"action": 12}]}), "trajectory[1].action: expected a string",
     "the command the agent ran"),
    (json.dumps({"trajectory": [], "info": {"score": {"Score": 1}}}), "info.score: expected a list",
     "one {metric: value} object per validation"),
    (json.dumps({"trajectory": [], "info": {"model_stats": {"total_cost": "lots"}}}),
     "info.model_stats.total_cost: expected a number >= 0", "a count or a cost in USD"),
    (json.dumps([1, 2]), "(top level): expected a JSON object", "MLGym's agent writes"),
])
def test_bad_input_is_one_line_naming_the_file_and_field(tmp_path, content, field, fix):
    bad = tmp_path / "in" / "prisonersDilemma.traj"
    bad.parent.mkdir()
    bad.write_text(content)
    good = tmp_path / "in" / "good"
    shutil.copytree(FIXTURES / PD0, good)
    proc = rgym("import", "mlgym-traj", str(tmp_path / "in"), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"error: {bad}: {field}") and fix in errors[0], errors[0]
    assert "imported 1 trajectory" in proc.stdout and "(1 not imported)" in proc.stdout  # the good one still is


def test_no_traj_file_is_an_error(tmp_path):
    proc = rgym("import", "mlgym-traj", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "no .traj file found" in proc.stderr and proc.stderr.count("\n") == 1

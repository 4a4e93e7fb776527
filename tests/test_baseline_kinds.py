"""Two kinds of baseline: the original's published figures and rgym's measured ones.

Real episodes of a copy of the demo task with an ``mlgym`` profile (whose measured
baseline was measured on a test fixture, beside MLGym-style published figures) and a
``cpu`` profile (measured on its data), then ``rgym score`` as a subprocess: which set
it scores against, that it says so, ``--baselines`` for the other, and that a figure
measured on a fixture never reaches scoring, ``validate``'s output or the agent's
prompt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core.serialization import SpecError
from rgym_core.specs import TaskSpec
from rgym_core.testing import run_cli

DEMO = Path(__file__).resolve().parents[1] / "rgym_core" / "demo" / "tasks" / "demo"
FIXTURE_R2 = 0.987654  # recorded for the mlgym profile, measured on a fixture
PUBLISHED_R2 = 0.5
MEASURED_R2 = 0.8720872187853115

PROFILES = f"""
default_profile: cpu
profiles:
  cpu:
    description: the demo as it is
    baseline:
      scores: {{r2: {MEASURED_R2}, rmse: 3.2114165701253286}}
      measured_on: data
      machine: a test machine
      data: the demo points
  mlgym:
    description: a stand-in for MLGym's configuration
    baseline:
      scores: {{r2: {FIXTURE_R2}, rmse: 0.123456}}
      measured_on: fixture
      data: a generated fixture
    published:
      baseline: {{r2: {PUBLISHED_R2}}}
      source: "test table 1"
"""

@pytest.fixture(scope="module")
def kinds_task(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kinds") / "demo"
    shutil.copytree(DEMO, folder)
    spec = folder / "task.yaml"
    text = spec.read_text().replace("id: rgym/demo\n", "id: kinds/demo\n", 1)
    spec.write_text(text + PROFILES)
    return folder


def rgym(task: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, tasks=[task])


def score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rgym_core.cli", "score", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def runs(kinds_task, tmp_path_factory) -> Path:
    """One scripted episode per profile (the demo's scripted actions validate twice)."""
    folder = tmp_path_factory.mktemp("kinds-runs")
    for profile in ("mlgym", "cpu"):
        proc = rgym(kinds_task, "run", "kinds/demo", "--profile", profile, "--agent", "scripted",
                    "--runs-dir", str(folder), "-q")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


def _result(runs: Path, profile: str) -> tuple[dict, Path]:
    for path in runs.rglob("result.json"):
        data = json.loads(path.read_text())
        if data.get("profile") == profile:
            return data, path.parent
    raise AssertionError(f"no run of profile {profile} under {runs}")


def test_fixture_figures_never_reach_the_result_or_validate(runs):
    mlgym, mlgym_dir = _result(runs, "mlgym")
    cpu, cpu_dir = _result(runs, "cpu")
    assert mlgym["baseline_scores"] == {}
    assert cpu["baseline_scores"]["r2"] == pytest.approx(MEASURED_R2)
    mlgym_text = (mlgym_dir / "trajectory.jsonl").read_text()
    assert "Baseline scores" not in mlgym_text and str(FIXTURE_R2) not in mlgym_text
    assert "Baseline scores: r2=" in (cpu_dir / "trajectory.jsonl").read_text()
    # config.json keeps the spec as run, so scoring can tell the two kinds apart
    config = json.loads((mlgym_dir / "config.json").read_text())["task"]
    assert config["baseline"]["measured_on"] == "fixture"
    assert config["published"]["baseline"] == {"r2": PUBLISHED_R2}


def _tasks(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr
    return {t["task"]: t for t in json.loads(proc.stdout)["tasks"]}


def test_score_uses_published_baselines_for_mlgym_runs_and_says_so(runs):
    proc = score(str(runs))
    assert proc.returncode == 0, proc.stderr
    assert "kinds/demo@mlgym (max)  baseline: published" in proc.stdout
    assert "kinds/demo@cpu (max)  baseline: measured" in proc.stdout
    assert ("note: baselines: published (the original benchmark's figures, as it scores them) for "
            "kinds/demo@mlgym; sources: test table 1") in proc.stdout
    assert "note: baselines: measured (rgym's own, on the run's profile) for kinds/demo@cpu" in proc.stdout
    tasks = _tasks(score(str(runs), "--format", "json"))
    assert tasks["kinds/demo@mlgym"]["baseline"] == PUBLISHED_R2
    assert tasks["kinds/demo@mlgym"]["baseline_kind"] == "published"
    assert tasks["kinds/demo@cpu"]["baseline"] == pytest.approx(MEASURED_R2)


def test_baselines_measured_refuses_the_fixture_figure(runs):
    proc = score(str(runs), "--baselines", "measured", "--format", "json")
    tasks = _tasks(proc)
    assert tasks["kinds/demo@mlgym"]["baseline"] is None
    assert tasks["kinds/demo@cpu"]["baseline_kind"] == "measured"
    assert str(FIXTURE_R2) not in proc.stdout
    assert ("note: baselines: none (no measured figure usable for scoring; a figure measured on a "
            "test fixture is never used) for kinds/demo@mlgym (kinds/demo@mlgym: refused: measured on "
            "a test fixture)") in proc.stderr
    table = score(str(runs), "--baselines", "measured")
    assert table.returncode == 0, table.stderr
    mlgym_rows = table.stdout.split("kinds/demo@mlgym (max)", 1)[1].split("kinds/demo", 1)[0]
    assert "baseline" not in mlgym_rows.split("\n", 1)[1].split("AUP", 1)[0]


def test_baselines_published_leaves_tasks_without_published_figures_without_baseline(runs):
    tasks = _tasks(score(str(runs), "--baselines", "published", "--format", "json"))
    assert tasks["kinds/demo@mlgym"]["baseline"] == PUBLISHED_R2
    assert tasks["kinds/demo@cpu"]["baseline"] is None


def test_baselines_option_is_checked(runs, tmp_path):
    bad = score(str(runs), "--baselines", "paper")
    assert bad.returncode == 2 and "'paper' is not one of 'auto', 'published', 'measured'" in bad.stderr
    table = tmp_path / "t.csv"
    table.write_text("Task,baseline,a\nT1,1,2\n")
    proc = score("--best-table", str(table), "--last-table", str(table), "--baselines", "published")
    assert proc.returncode == 2 and "--baselines needs RUN_DIRS" in proc.stderr


def test_the_agent_prompt_never_shows_a_fixture_figure(kinds_task, tmp_path):
    from rgym_llm.testing import FakeLLMServer, Reply

    prompts = {}
    for profile in ("mlgym", "cpu"):
        with FakeLLMServer([Reply(text="DISCUSSION\nSubmit.\n```\nsubmit\n```")]) as server:
            proc = rgym(kinds_task, "run", "kinds/demo", "--profile", profile, "--agent", "react",
                        "--model", "openai-compatible/test-model", "--base-url", server.base_url,
                        "--runs-dir", str(tmp_path / "runs"), "-q",
                        env={"OPENAI_API_KEY": "sk-test", "RGYM_PRICES": ""})
            assert proc.returncode in (0, 1), proc.stdout + proc.stderr
            assert server.requests, proc.stdout + proc.stderr
            prompts[profile] = json.dumps(server.requests[0].json["messages"])
    assert "BASELINE SCORES (to beat): r2=0.872087" in prompts["cpu"]
    assert "BASELINE SCORES" not in prompts["mlgym"]
    assert "0.987654" not in prompts["mlgym"] and "0.123456" not in prompts["mlgym"]


@pytest.mark.parametrize(("patch", "line"), [
    (("source: \"test table 1\"\n", ""),
     "profiles['mlgym'].published.source: is required with published figures"),
    (("measured_on: fixture", "measured_on: fixtures"),
     "profiles['mlgym'].baseline.measured_on: must be one of 'data', 'fixture', 'published', "
     "got 'fixtures'"),
    (("baseline: {r2: 0.5}", "baseline: {acc: 0.5}"),
     "profiles['mlgym'].published.baseline: names unknown metric(s) acc"),
])
def test_a_bad_field_is_one_line_naming_file_field_and_fix(kinds_task, tmp_path, patch, line):
    bad = tmp_path / "bad"
    shutil.copytree(kinds_task, bad)
    spec = bad / "task.yaml"
    spec.write_text(spec.read_text().replace(*patch))
    from rgym_core.serialization import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(spec, TaskSpec)
    assert str(err.value).startswith(f"{spec}: {line}")
    assert "\n" not in str(err.value)
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "check-pack", str(bad), "--fast"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and line in proc.stdout.replace("\n", " ").replace("  ", " ")


def test_check_pack_says_which_figures_are_which(kinds_task):
    proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "check-pack", str(kinds_task), "--fast"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    out = proc.stdout
    assert "measured on a test fixture (baseline.measured_on: fixture)" in out, out
    assert "published figures cited: test table 1" in out, out
    assert "baseline scores measured on the profile's data (a test machine)" in out, out


def test_a_run_recorded_before_these_fields_takes_them_from_the_installed_task(tmp_path):
    """A cifar10 `mlgym` run written before task specs carried `published` and
    `measured_on` (its result records the fixture figure 0.9 as the baseline): the
    installed task says that figure is a fixture's, and gives MLGym's published one."""
    from rgym_core.records import EpisodeResult, ExitStatus, ScoreRecord
    from rgym_core.registry import load_registry
    from rgym_core.rundir import create_run_dir, write_config, write_result

    try:
        spec = load_registry().task("mlgym/cifar10").with_profile("mlgym")
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"rgym-task-vision is not installed (pip install -e task-packs/vision): {exc}")
    fixture = spec.baseline.scores["accuracy"]
    assert spec.baseline.on_fixture and spec.published.baseline["accuracy"] == 0.4971
    run = create_run_dir(tmp_path / "runs" / "old")
    write_config(run.path, {"task": {"id": "mlgym/cifar10", "profile": "mlgym",
                                     "baseline": {"command": "python baseline.py",
                                                  "scores": {"accuracy": fixture}}}})
    write_result(run.path, EpisodeResult(
        run_id="old1", task_id="mlgym/cifar10", agent="x/a", status=ExitStatus.SUBMITTED, seed=1,
        profile="mlgym", primary_metric="accuracy", baseline_scores={"accuracy": fixture},
        scores=[ScoreRecord(step=0, kind="submit", valid=True, scores={"accuracy": 0.6})]))
    auto = _tasks(score(str(tmp_path / "runs"), "--format", "json"))["mlgym/cifar10"]
    assert (auto["baseline"], auto["baseline_kind"]) == (0.4971, "published")
    measured = score(str(tmp_path / "runs"), "--format", "json", "--baselines", "measured")
    assert _tasks(measured)["mlgym/cifar10"]["baseline"] is None
    assert "refused: measured on a test fixture" in measured.stderr


def test_published_figures_marked_not_comparable_are_never_the_default(runs, tmp_path):
    """``published.comparable: false`` (3-SAT: MLGym's seconds on its own instances): `auto`
    scores against rgym's measured figure instead; `--baselines published` still can."""
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    _, mlgym_dir = _result(copy, "mlgym")
    config_file = mlgym_dir / "config.json"
    config = json.loads(config_file.read_text())
    config["task"]["published"]["comparable"] = False
    config_file.write_text(json.dumps(config))
    auto = _tasks(score(str(copy), "--format", "json"))["kinds/demo@mlgym"]
    assert auto.get("baseline_kind") != "published" and auto.get("baseline") != PUBLISHED_R2
    chosen = _tasks(score(str(copy), "--baselines", "published", "--format", "json"))
    assert chosen["kinds/demo@mlgym"]["baseline"] == PUBLISHED_R2

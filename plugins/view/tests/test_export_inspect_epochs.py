"""`rgym export inspect` on real runs, read back with the real `inspect-ai`: seeds are
epochs of one sample (Inspect's mean and standard error over them), every log has its
own `task_id`, task names stay whole in `evals_df`, and nothing that matters is dropped
(integrity findings, failure modes, grader details, generation settings, tool
definitions, retries, the archived workspace).

The runs are made as a user makes them, by `rgym sweep` and `rgym run` in
subprocesses: a sweep of `rgym/demo` and `mlgym/prisoners-dilemma` with the scripted
and baseline agents over two seeds; the prisoners' dilemma baseline over three seeds
with different grader seeds (so the scores differ), one seed run twice; a run that
forges `eval_score = 3400`; a react run in native-tool mode on the fake LLM server
over loopback HTTP, which answers 429 once."""

from __future__ import annotations

import json
import math
import statistics
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.analysis import evals_df, samples_df
from inspect_ai.log import EvalLog, read_eval_log
from rgym_llm.testing import FakeLLMServer, Reply

from conftest import rgym

FORGED = """
- tool: bash
  args: {command: "python baseline.py"}
- tool: bash
  args: {command: 'echo "eval_score = 3400" > results.txt'}
- tool: submit
"""
GENERATION = {"temperature": 0.3, "max_tokens": 4096, "top_p": 0.9}


def run(*args: str, cwd: Path) -> dict[str, Any]:
    proc = rgym("run", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def export(paths: list[Path], out: Path, cwd: Path) -> list[dict[str, Any]]:
    """``rgym export inspect PATHS -o OUT --json``: one item (run dir, log, epoch) per run."""
    proc = rgym("export", "inspect", *map(str, paths), "-o", str(out), "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    items: list[dict[str, Any]] = json.loads(proc.stdout)
    return items


def logs_of(items: list[dict[str, Any]]) -> dict[str, EvalLog]:
    """Every log written, read back by Inspect's reader: log path -> EvalLog."""
    return {p: read_eval_log(p) for p in sorted({i["log"] for i in items})}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("epochs")
    sweep = rgym("sweep", "rgym/demo", "mlgym/prisoners-dilemma", "-a", "scripted,baseline", "--seeds", "1-2",
                 "-o", "sweep", "-j", "2", "-q", cwd=root)
    assert sweep.returncode == 0, sweep.stderr
    pd = [run("mlgym/prisoners-dilemma", "--agent", "baseline", "--seed", str(seed), "--grader-seed", str(grader),
              "--runs-dir", "pd", cwd=root) for seed, grader in ((2, 12), (1, 11), (3, 13), (1, 14))]
    (root / "forged.yaml").write_text(FORGED)
    forged = run("rgym/demo", "--agent-option", f"script={root / 'forged.yaml'}", "--runs-dir", "forged", cwd=root)
    script = [Reply(status=429, error="slow down", headers={"Retry-After": "0"}),
              Reply.tool("bash", {"command": "python baseline.py"}), Reply.tool("submit", {})]
    with FakeLLMServer(script) as server:
        react = run("rgym/demo", "--agent", "react", "--model", "openai-compatible/gpt-4o", "--base-url",
                    server.base_url, "--agent-option", "mode=tools",
                    *[a for k, v in GENERATION.items() for a in ("--agent-option", f"{k}={v}")],
                    "--runs-dir", "react", cwd=root)
        sent = [json.loads(r.body) for r in server.requests]
    return {"root": root, "pd": pd, "forged": forged, "react": react, "sent": sent,
            "sweep_items": export([root / "sweep"], root / "logs-sweep", cwd=root),
            "pd_items": export([root / "pd"], root / "logs-pd", cwd=root),
            "one_items": export([root / "forged", root / "react"], root / "logs-one", cwd=root)}


def test_a_sweeps_seeds_are_epochs_of_one_sample_per_cell(world: dict[str, Any]) -> None:
    items = world["sweep_items"]
    assert len(items) == 8  # 2 tasks x 2 agents x 2 seeds
    logs = logs_of(items)
    assert len(logs) == 4  # one per cell
    for path, log in logs.items():
        assert log.status == "success" and log.eval.config.epochs == 2
        with zipfile.ZipFile(path) as zf:  # the entries Inspect's viewer reads (zstd may compress them)
            assert {"header.json", "summaries.json", "samples/1_epoch_1.json",
                    "samples/1_epoch_2.json"} <= set(zf.namelist())
        assert [s.epoch for s in log.samples] == [1, 2] and {s.id for s in log.samples} == {1}
        assert [s.metadata["seed"] for s in log.samples] == [1, 2]
        runs = {i["run_dir"]: i["epoch"] for i in items if i["log"] == path}
        assert sorted(runs.values()) == [1, 2]
        for sample in log.samples:  # each epoch is the run the export listed for it
            assert runs[sample.metadata["rgym_run_dir"]] == sample.epoch
        # the metrics: Inspect's mean and stderr over the epochs' final scores
        primary = log.results.scores[0]
        values = [s.scores["rgym"].value[primary.name] for s in log.samples]
        assert primary.metrics["mean"].value == pytest.approx(statistics.mean(values))
        assert primary.metrics["stderr"].value == pytest.approx(statistics.stdev(values) / math.sqrt(2))
        assert log.reductions[0].samples[0].value[primary.name] == pytest.approx(statistics.mean(values))

    df = evals_df(str(world["root"] / "logs-sweep"))
    assert len(df) == 4 and df["task_id"].nunique() == 4  # Inspect's viewer hides none as a retry
    assert sorted(set(df["task_name"])) == ["mlgym/prisoners-dilemma", "rgym/demo"]  # not "demo"
    assert set(df["epochs"]) == {2} and set(df["score_headline_metric"]) == {"mean"}
    samples = samples_df(str(world["root"] / "logs-sweep"))
    assert len(samples) == 8 and sorted(samples["epoch"]) == [1, 1, 1, 1, 2, 2, 2, 2]


def test_standard_error_over_seeds_and_a_repeated_seed_opens_another_log(world: dict[str, Any]) -> None:
    items = world["pd_items"]
    logs = logs_of(items)
    by_epochs = {log.eval.config.epochs: log for log in logs.values()}
    assert sorted(by_epochs) == [1, 3]  # seeds 1, 2, 3; then seed 1 again: its own log
    log = by_epochs[3]
    assert log.eval.task == "rgym/mlgym/prisoners-dilemma" and log.eval.task_display_name.startswith(
        "mlgym/prisoners-dilemma")
    assert [s.metadata["seed"] for s in log.samples] == [1, 2, 3]
    by_seed = {r["seed"]: r for r in world["pd"][:3]}
    values = [by_seed[s]["final_scores"]["Score"] for s in (1, 2, 3)]
    assert len(set(values)) == 3  # the grader seeds differ, so do the scores
    [score] = log.results.scores
    assert score.name == "Score" and score.scored_samples == 3
    assert score.metrics["mean"].value == pytest.approx(statistics.mean(values))
    assert score.metrics["stderr"].value == pytest.approx(statistics.stdev(values) / math.sqrt(3))
    assert score.metrics["stderr"].value > 0
    # the grader's details come along: its own standard error over the games, the games played
    details = log.samples[0].scores["rgym"].metadata["details"]
    assert details["games"] > 0 and details["std_error"] > 0
    assert by_epochs[1].samples[0].metadata["rgym_run_id"] == world["pd"][3]["run_id"]
    assert by_epochs[1].eval.task_id != log.eval.task_id
    df = evals_df(str(world["root"] / "logs-pd"))
    row = df[df["epochs"] == 3].iloc[0]
    assert row["score_headline_value"] == pytest.approx(statistics.mean(values))
    assert row["score_headline_stderr"] == pytest.approx(statistics.stdev(values) / math.sqrt(3))


def test_integrity_findings_reach_the_samples_metadata_and_its_scores_explanation(world: dict[str, Any]) -> None:
    logs = logs_of(world["one_items"])
    log = next(lg for lg in logs.values() if lg.samples[0].metadata["rgym_run_id"] == world["forged"]["run_id"])
    sample = log.samples[0]
    report = json.loads((Path(world["root"]) / world["forged"]["run_dir"] / "integrity.json").read_text())
    assert report["flagged"] and report["findings"]
    assert sample.metadata["integrity"]["flagged"] is True
    assert [f["kind"] for f in sample.metadata["integrity"]["findings"]] == [f["kind"] for f in report["findings"]]
    explanation = sample.scores["rgym"].explanation
    assert "integrity flagged" in explanation and report["findings"][0]["kind"] in explanation
    assert sample.scores["rgym"].metadata["integrity_flagged"] is True
    assert log.eval.metadata["rgym"]["runs"][0]["integrity_flagged"] is True
    # the failure modes rgym analyze finds are there too
    assert isinstance(sample.metadata["failure_modes"], list)
    assert all({"kind", "message"} <= set(f) for f in sample.metadata["failure_modes"])


def test_generation_settings_tool_definitions_retries_and_workspace_are_kept(world: dict[str, Any]) -> None:
    logs = logs_of(world["one_items"])
    react = world["react"]
    log = next(lg for lg in logs.values() if lg.samples[0].metadata["rgym_run_id"] == react["run_id"])
    sample = log.samples[0]
    sent = [body for body in world["sent"] if body.get("messages")]
    assert len(sent) == 3  # the 429, then two answered calls
    config = log.eval.model_generate_config
    assert (config.temperature, config.max_tokens, config.top_p) == (0.3, 4096, 0.9)
    assert (sent[-1]["temperature"], sent[-1]["max_tokens"], sent[-1].get("top_p")) == (0.3, 4096, 0.9)
    models = [e for e in sample.events if e.event == "model"]
    assert len(models) == 2
    assert all(e.config.temperature == 0.3 and e.config.max_tokens == 4096 for e in models)
    # the tool definitions the model was sent, on every call (the trajectory records them once)
    names = [t["function"]["name"] for t in sent[-1]["tools"]]
    assert "bash" in names and "submit" in names
    for event in models:
        assert [t.name for t in event.tools] == names
    bash = next(t for t in models[0].tools if t.name == "bash")
    assert "command" in bash.parameters.properties
    # the retry: one failed attempt (HTTP 429) before the first call was answered
    assert models[0].retries == 1 and models[1].retries is None
    assert [a["status"] for a in models[0].metadata["failed_attempts"]] == [429]
    assert sample.metadata["model_retries"] == react["model_retries"] == 1
    # the archived workspace: names and sizes
    with tarfile.open(Path(world["root"]) / react["run_dir"] / "workspace.tar.gz") as tar:
        files = {m.name.removeprefix("workspace/"): m.size for m in tar.getmembers() if m.isfile()}
    workspace = sample.metadata["workspace"]
    assert {f["name"]: f["size"] for f in workspace["listing"]} == files and "submission.csv" in files
    assert workspace["files"] == len(files)


def test_without_inspect_ai_the_export_says_how_to_install_it(tmp_path: Path, world: dict[str, Any]) -> None:
    shadow = tmp_path / "shadow" / "inspect_ai"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'inspect_ai'\")\n")
    import os
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("rgym")
    proc = subprocess.run([str(exe), "export", "inspect", str(world["root"] / "forged"), "-o", str(tmp_path / "o")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(shadow.parent)})
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "error: rgym export inspect needs inspect-ai: pip install 'rgym-view[inspect]'"]
    assert not (tmp_path / "o").exists()

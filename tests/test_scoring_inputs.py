"""Loading run directories, long-format files and MLGym's wide tables, and the
one-line errors for malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgym_core.records import EpisodeResult, ExitStatus, ScoreRecord
from rgym_core.scoring.api import score_long, score_runs, score_wide
from rgym_core.scoring.inputs import InputError, load_long, load_runs, load_wide
from rgym_core.serialization import unstructure


def write_result(root: Path, sub: str, **kw) -> Path:
    defaults = dict(run_id="r", task_id="pack/t", agent="rgym/scripted", status=ExitStatus.SUBMITTED,
                    primary_metric="acc", direction="maximize", baseline_scores={"acc": 0.5},
                    reference_scores={"acc": 1.0})
    defaults.update(kw)
    result = EpisodeResult(**defaults)
    path = root / sub / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(unstructure(result)))
    return path


def rec(step: int, kind: str, acc: float | None, **kw) -> ScoreRecord:
    return ScoreRecord(step=step, kind=kind, valid=acc is not None,
                       scores={} if acc is None else {"acc": acc}, **kw)


def test_run_directories_at_any_depth(tmp_path):
    write_result(tmp_path, "a/b/c/run1", run_id="1", seed=0, model="openai/gpt-x",
                 scores=[rec(1, "validate", 0.6), rec(2, "validate", 0.8), rec(3, "submit", 0.7)])
    write_result(tmp_path, "a/run2", run_id="2", seed=1, model="openai/gpt-x",
                 scores=[rec(1, "validate", 0.9), rec(5, "submit", None, error="boom")],
                 status=ExitStatus.EVALUATION_ERROR)
    write_result(tmp_path, "run3", run_id="3", seed=0, scores=[])
    data = load_runs([tmp_path])
    solvers = sorted((e.solver, e.run, tuple(e.values)) for e in data.episodes)
    assert solvers == [("scripted", "0", ()), ("scripted/openai_gpt-x", "0", (0.6, 0.8, 0.7)),
                       ("scripted/openai_gpt-x", "1", (0.9,))]
    info = data.tasks["pack/t"]
    assert (info.metric, info.baseline, info.reference) == ("acc", 0.5, 1.0)
    report = score_runs([tmp_path])
    s = {x.solver: x for x in report.summaries}["scripted/openai_gpt-x"]
    # run 1's failed submission: its last valid validate (0.9) stands in for it
    assert (s.best_at_k, s.last_at_k, s.failed) == (0.9, 0.9, 0)
    assert {x.solver: x.failed for x in report.summaries}["scripted"] == 1
    assert report.best_table["pack/t"]["baseline"] == 0.5
    by_model = load_runs([tmp_path], solver_key="model")
    assert {e.solver for e in by_model.episodes} == {"openai/gpt-x", "(no model)"}


def test_run_subtasks_and_solver_tag(tmp_path):
    write_result(tmp_path, "r", tags={"variant": "v1"},
                 subtasks=[{"id": "s1", "metric": "acc", "reference_scores": {"acc": 2.0},
                            "weight": 2.0, "primary": False}, {"id": "s2"}],
                 scores=[rec(1, "submit", 0.6, subtasks={"s1": {"acc": 1.0}})])
    data = load_runs([tmp_path], solver_key="variant")
    assert data.episodes[0].solver == "v1"
    assert data.episodes[0].subtasks == {"s1": 1.0}
    assert [s.id for s in data.tasks["pack/t"].subtasks] == ["s1", "s2"]
    report = score_runs([tmp_path])
    assert report.rates[0].completion_rate == pytest.approx(2 / 3)


def test_solvers_named_like_the_task_scores_are_renamed(tmp_path):
    for i, agent in enumerate(("pack/baseline", "pack/baseline", "x/baseline-agent",
                               "pack/reference")):
        write_result(tmp_path, f"r{i}", run_id=str(i), seed=i, agent=agent,
                     scores=[rec(1, "submit", 0.6 + i / 10)])
    data = load_runs([tmp_path])
    runs = sorted((e.solver, e.run) for e in data.episodes)
    assert runs == [("baseline-agent", "2"), ("baseline-agent-2", "0"), ("baseline-agent-2", "1"),
                    ("reference-agent", "3")]
    assert data.notes == [
        "note: agent 'baseline' shown as 'baseline-agent-2' ('baseline' = task's baseline)",
        "note: agent 'reference' shown as 'reference-agent' ('reference' = task's reference)"]
    report = score_runs([tmp_path])
    assert report.best_table["pack/t"]["baseline"] == 0.5
    assert report.best_table["pack/t"]["baseline-agent-2"] == pytest.approx(0.7)
    assert report.to_data()["notes"] == data.notes
    by_model = load_runs([tmp_path], solver_key="model")  # no model: no clash
    assert by_model.notes == []


def test_a_model_or_tag_named_baseline_is_renamed_after_its_key(tmp_path):
    write_result(tmp_path, "r", model="baseline", tags={"group": "baseline"},
                 scores=[rec(1, "submit", 0.6)])
    assert load_runs([tmp_path], solver_key="model").episodes[0].solver == "baseline-model"
    data = load_runs([tmp_path], solver_key="group")
    assert data.episodes[0].solver == "baseline-tag"
    assert data.notes == ["note: tag group='baseline' shown as 'baseline-tag' "
                          "('baseline' = task's baseline)"]


def test_bad_result_file_names_the_file_and_field(tmp_path):
    write_result(tmp_path, "good", scores=[rec(1, "submit", 0.6)])
    path = write_result(tmp_path, "r")
    raw = json.loads(path.read_text())
    raw["scores"] = [{"step": "x", "kind": "submit", "valid": True}]
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"result\.json: scores\[0\]\.step: expected an integer"):
        load_runs([tmp_path], strict=True)
    data = load_runs([tmp_path])  # without strict: skipped, with a warning naming it
    assert len(data.episodes) == 1
    assert len(data.warnings) == 1 and str(path) in data.warnings[0]
    assert [(p.path, p.state) for p in data.pending] == [(str(path.parent), "corrupt")]
    path.write_text("{")
    with pytest.raises(InputError, match=r"result\.json: line 1: invalid JSON"):
        load_runs([tmp_path], strict=True)
    (tmp_path / "good" / "result.json").unlink()
    (tmp_path / "good" / "trajectory.jsonl").write_text("")
    with pytest.raises(InputError, match=r"no run with a readable result\.json"):
        load_runs([tmp_path])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: no result.json found"):
        load_runs([tmp_path / "empty"])
    with pytest.raises(InputError, match="missing: no such file or directory"):
        load_runs([tmp_path / "missing"])


def test_long_csv(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("solver,task,run,metric,value,direction\n"
                 "a,t1,0,loss,3.0,minimize\na,t1,0,loss,2.0,\na,t1,0,loss,2.5,\n"
                 "a,t1,1,loss,,\nbaseline,t1,0,loss,4.0,\nb,t1,0,loss,1.0,\n"
                 "a,t2,0,acc,0.5,\na,t2,0,f1,0.1,\nbaseline,t2,0,acc,0.4,\n")
    data = load_long(f)
    assert data.tasks["t1"].direction == "minimize" and data.tasks["t1"].baseline == 4.0
    assert data.tasks["t2"].metric == "acc" and data.tasks["t2"].direction == "maximize"
    report = score_long(f, directions=lambda t: None)
    a = {(x.task, x.solver): x for x in report.summaries}[("t1", "a")]
    assert (a.runs, a.failed, a.best_at_k, a.last_at_k) == (2, 1, 2.0, 2.5)
    assert report.best_table["t1"] == {"a": 2.0, "b": 1.0, "baseline": 4.0}


def test_long_baseline_rows_are_the_task_score_and_several_runs_get_a_note(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("solver,task,run,metric,value\n"
                 "baseline,t,0,acc,0.5\nbaseline,t,1,acc,0.6\nbaseline-agent,t,0,acc,0.7\n"
                 "baseline,u,0,acc,0.4\nbaseline,u,1,acc,0.4\na,u,0,acc,0.3\n")
    report = score_long(f, directions=lambda t: None)
    assert report.best_table == {"t": {"baseline": 0.6, "baseline-agent": 0.7},
                                 "u": {"baseline": 0.4, "a": 0.3}}
    assert {x.solver for x in report.summaries} == {"baseline-agent", "a"}
    assert report.notes == [f"note: {f}: 'baseline' has 2 differing runs on task 't': read as "
                            f"the task's score (last value); name agent runs 'baseline-agent'"]


def test_long_jsonl_with_primary_and_subtasks(tmp_path):
    f = tmp_path / "long.jsonl"
    rows = [{"solver": "a", "task": "t", "run": 1, "metric": "f1", "value": 0.1},
            {"solver": "a", "task": "t", "run": 1, "metric": "acc", "value": 0.7, "primary": True},
            {"solver": "a", "task": "t", "run": 1, "metric": "acc", "value": 0.5, "subtask": "s"},
            {"solver": "reference", "task": "t", "run": 0, "metric": "acc", "value": 1.0,
             "subtask": "s"},
            {"solver": "reference", "task": "t", "run": 0, "metric": "acc", "value": 0.7}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    data = load_long(f, minimize=["t"])
    info = data.tasks["t"]
    assert (info.metric, info.direction, info.reference) == ("acc", "minimize", 0.7)
    assert info.subtasks[0].id == "s" and info.subtasks[0].reference == 1.0
    assert data.episodes[0].values == [0.7] and data.episodes[0].subtasks == {"s": 0.5}


@pytest.mark.parametrize("text, message", [
    ("solver,task,run,value\n", r"row 1 \(header\): missing column\(s\) metric"),
    ("solver,task,run,metric,value\na,t,0,acc,high\n", r"row 2: column 'value': expected a number, got 'high'"),
    ("solver,task,run,metric,value\na,,0,acc,1\n", r"row 2: column 'task': missing value"),
    ("solver,task,run,metric,value,direction\na,t,0,acc,1,up\n", r"row 2: column 'direction': expected 'maximize' or 'minimize'"),
    ("solver,task,run,metric,value\n", "no data rows"),
])
def test_long_errors_name_file_row_and_column(tmp_path, text, message):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(InputError, match=rf"bad\.csv: {message}"):
        load_long(f)


def test_long_jsonl_errors(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"solver": "a"}\n[1]\n')
    with pytest.raises(InputError, match=r"bad\.jsonl: line 1: column 'task': missing value"):
        load_long(f)
    f.write_text('{"solver": "a", "task": "t", "run": 0, "metric": "m", "value": 1}\n[1]\n')
    with pytest.raises(InputError, match=r"bad\.jsonl: line 2: expected a JSON object"):
        load_long(f)


def _wide(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_wide_tables_and_directions(tmp_path):
    best = _wide(tmp_path, "b.csv", "Task,baseline,a,b\nT1,1.0,2.0,\nT2,5,4,6\n")
    last = _wide(tmp_path, "l.csv", "Task,baseline,a,b\nT1,1.0,1.5,\nT2,5,4.5,6\n")
    wide = load_wide(best, last, minimize=["T2"], directions=lambda t: None)
    assert wide.directions == {"T1": "maximize", "T2": "minimize"}
    assert wide.best["T1"] == {"baseline": 1.0, "a": 2.0, "b": None}
    wide = load_wide(best, last, directions=lambda t: "minimize" if t == "T1" else None)
    assert wide.directions == {"T1": "minimize", "T2": "maximize"}
    report = score_wide(best, last, minimize=["T2"], directions=lambda t: None)
    assert report.profiles.best.tasks["T2"].ratios["a"] == 1.0
    assert report.profiles.best.tasks["T2"].ratios["b"] == pytest.approx(1.25 * 1.05)


@pytest.mark.parametrize("text, message", [
    ("Model,baseline\n", r"row 1, column 1: expected the header 'Task,<solver>,...'"),
    ("Task,baseline,a\nT1,1,x\n", r"row 2, column 3 \(a\): expected a number, got 'x'"),
    ("Task,baseline,a\nT1,1\n", r"row 2: expected 3 cells, got 2"),
    ("Task,baseline,a\n,1,2\n", r"row 2, column 1 \(Task\): missing task name"),
    ("Task,baseline,a\nT1,1,2\nT1,1,2\n", r"row 3, column 1 \(Task\): duplicate task 'T1'"),
    ("Task,base,a\nT1,1,2\n", r"row 1: no baseline column 'baseline' \(columns: base, a\)"),
])
def test_wide_errors_name_file_row_and_column(tmp_path, text, message):
    bad = _wide(tmp_path, "bad.csv", text)
    good = _wide(tmp_path, "good.csv", "Task,baseline,a\nT1,1,2\n")
    with pytest.raises(InputError, match=rf"bad\.csv: {message}"):
        load_wide(bad, good, directions=lambda t: None)


def test_wide_minimize_must_name_a_row(tmp_path):
    good = _wide(tmp_path, "good.csv", "Task,baseline,a\nT1,1,2\n")
    with pytest.raises(InputError, match=r"--minimize names no row: T9 \(rows: T1\)"):
        load_wide(good, good, minimize=["T9"], directions=lambda t: None)

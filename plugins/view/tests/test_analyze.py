"""`rgym analyze` as a user runs it: on real rgym/demo episodes (an honest scripted
run, one that submits before validating, one that repeats a failing command five
times) and on synthetic run directories showing each other failure mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rgym_view.analysis import classify, classify_command, first_program

from conftest import make_run, rgym


def analyze_json(*args: str, cwd: Path) -> dict[str, Any]:
    proc = rgym("analyze", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def by_name(report: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [r for r in report["runs"] if Path(r["path"]).name == name]
    assert len(matches) == 1, (name, [r["path"] for r in report["runs"]])
    return matches[0]


def warnings(run: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in run["findings"] if f["severity"] == "warning"}


def test_analyze_flags_the_premature_submit_and_the_debug_loop_and_not_the_honest_run(
        runs_folder: Path, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    report = analyze_json(str(runs_folder), "--plots", str(plots), cwd=tmp_path)
    assert len(report["runs"]) == 4
    honest = by_name(report, demo_runs["honest"].name)
    premature = by_name(report, demo_runs["premature"].name)
    loop = by_name(report, demo_runs["loop"].name)
    react = by_name(report, demo_runs["react"].name)

    assert warnings(honest) == set() and not honest["flagged"]
    assert warnings(react) == set() and not react["flagged"]
    assert warnings(premature) == {"premature_submit"} and premature["flagged"]
    finding = next(f for f in premature["findings"] if f["kind"] == "premature_submit")
    assert finding["steps"] == [2] and "before any validation" in finding["message"]
    assert warnings(loop) == {"debug_loop"} and loop["flagged"]
    finding = next(f for f in loop["findings"] if f["kind"] == "debug_loop")
    assert finding["steps"] == [1, 2, 3, 4, 5]
    assert "python train.py --epochs 3" in finding["message"]

    # the action mix: every step classed, per run and per (task, solver)
    assert honest["actions"] == {"run": 1, "validate": 1, "submit": 1}
    assert loop["actions"] == {"run": 6, "validate": 1, "submit": 1}
    scripted = next(g for g in report["groups"] if g["solver"].endswith("scripted"))
    assert scripted["runs"] == 3 and scripted["steps"] == 3 + 2 + 8
    assert scripted["actions"]["run"] == 1 + 1 + 6
    assert scripted["failure_modes"]["debug_loop"] == 1 and scripted["failure_modes"]["premature_submit"] == 1
    assert scripted["statuses"] == {"submitted": 3} and scripted["end_reasons"] == {"submit": 3}
    assert abs(sum(scripted["action_share"].values()) - 1) < 1e-9
    # the action mix over the episode: each step in one tenth, the loop's runs early, its submit last
    assert len(loop["phases"]) == 10
    counted: dict[str, int] = {}
    for tenth in loop["phases"]:
        for k, v in tenth.items():
            counted[k] = counted.get(k, 0) + v
    assert counted == loop["actions"]
    assert set(loop["phases"][0]) == {"run"} and "submit" in loop["phases"][9]
    assert len(scripted["action_share_by_phase"]) == 10

    # the plots, PNG and SVG
    names = {Path(p).name for p in report["plots"]}
    for stem in ("action_mix", "action_phases", "endings", "failure_modes", "cost_improvement"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names
        assert (plots / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (plots / f"{stem}.svg").read_text()[:2000]

    # the tables a person reads
    proc = rgym("analyze", str(runs_folder), "--no-plots", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for heading in ("Action mix", "How episodes ended", "Why the agent's loop ended", "Failure modes",
                    "Runs with findings"):
        assert heading in text
    assert "warning premature_submit: submitted at step 2 before any validation" in text
    assert "warning debug_loop: the same command failed 5 times" in text
    assert "4 runs, 2 with warnings" in text


BUDGET = {"max_steps": 50, "time_limit_s": 3600.0, "action_timeout_s": 600.0, "cost_limit_usd": 10.0,
          "token_limit": None}


def _bash(command: str, *, code: int = 0, output: str = "", duration: float = 0.5, **extra: Any) -> dict[str, Any]:
    return {"tool": "bash", "args": {"command": command}, "exit_code": code, "error": code != 0,
            "output": output, "duration": duration, **extra}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One run per failure mode (and near misses that must not be flagged), analysed once."""
    runs = tmp_path_factory.mktemp("analyze") / "runs"
    validate = {"tool": "validate", "output": "ok"}
    submit = {"tool": "submit", "output": "submitted"}
    make_run(runs / "regressed", [_bash("python train.py"), validate, _bash("python train.py --big"), validate,
                                  submit], budget=BUDGET, final={"accuracy": 0.6},
             gradings=[{"step": 2, "scores": {"accuracy": 0.8}}, {"step": 4, "scores": {"accuracy": 0.6}},
                       {"step": 5, "kind": "submit", "scores": {"accuracy": 0.6}}])
    make_run(runs / "improved", [_bash("python train.py"), validate, _bash("python train.py --big"), validate,
                                 submit], budget=BUDGET, final={"accuracy": 0.8},
             gradings=[{"step": 2, "scores": {"accuracy": 0.6}}, {"step": 4, "scores": {"accuracy": 0.8}},
                       {"step": 5, "kind": "submit", "scores": {"accuracy": 0.8}}])
    refused = {"tool": "edit", "args": {"path": "train.py", "start": 3, "end": 4, "text": "x = ("},
               "error": True, "output": "Your edit was not applied: syntax error", "info": {"applied": False}}
    look = {"tool": "open", "args": {"path": "train.py"}, "output": "1: import torch"}
    make_run(runs / "rejected", [refused, look, refused, refused, validate, submit], budget=BUDGET,
             final={"accuracy": 0.5}, gradings=[{"step": 5, "scores": {"accuracy": 0.5}},
                                                {"step": 6, "kind": "submit", "scores": {"accuracy": 0.5}}])
    make_run(runs / "idle", [_bash("sleep 400", duration=400.0), _bash("python train.py", duration=700.0,
                                                                         code=124, info={"timed_out": True}),
                             validate, submit], budget=BUDGET, final={"accuracy": 0.55},
             gradings=[{"step": 3, "scores": {"accuracy": 0.55}},
                       {"step": 4, "kind": "submit", "scores": {"accuracy": 0.55}}])
    # a command that fails twice, then works, then fails twice: no streak of three
    make_run(runs / "recovered", [_bash("make", code=2), _bash("make", code=2), _bash("make"),
                                  _bash("make", code=2), _bash("make", code=2), validate, submit],
             budget=BUDGET, final={"accuracy": 0.7},
             gradings=[{"step": 6, "scores": {"accuracy": 0.7}},
                       {"step": 7, "kind": "submit", "scores": {"accuracy": 0.7}}])
    # edits between failing attempts do not break a debug loop
    fix = {"tool": "edit", "args": {"path": "train.py", "start": 1, "end": 1, "text": "import numpy"},
           "output": "edited"}
    make_run(runs / "looped", [_bash("python train.py", code=1), fix, _bash("python train.py", code=1), fix,
                               _bash("python train.py", code=1), validate, submit], budget=BUDGET,
             final={"accuracy": 0.5}, gradings=[{"step": 6, "scores": {"accuracy": 0.5}},
                                                {"step": 7, "kind": "submit", "scores": {"accuracy": 0.5}}])
    costly = [{**_bash("python train.py"), "cost": 1.0, "tokens": (20_000, 500)} for _ in range(2)]
    make_run(runs / "costly", [*costly, validate, submit], budget=BUDGET, final={"accuracy": 0.6},
             gradings=[{"step": 3, "scores": {"accuracy": 0.6}},
                       {"step": 4, "kind": "submit", "scores": {"accuracy": 0.6}}])
    make_run(runs / "wasted", [{**_bash("python train.py"), "cost": 0.5, "tokens": (9000, 100)}, validate, submit],
             budget=BUDGET, final={"accuracy": 0.4},
             gradings=[{"step": 2, "scores": {"accuracy": 0.4}},
                       {"step": 3, "kind": "submit", "scores": {"accuracy": 0.4}}])
    return runs, analyze_json(str(runs), "--no-plots", cwd=runs.parent)


def test_submitting_right_after_a_regression_is_premature(synthetic: tuple[Path, dict[str, Any]]) -> None:
    _, report = synthetic
    run = by_name(report, "regressed")
    assert warnings(run) == {"premature_submit"}
    finding = run["findings"][0]
    assert finding["steps"] == [4, 5] and "regression" in finding["message"]
    assert warnings(by_name(report, "improved")) == set()


def test_editor_rejections_in_a_row_and_long_idle_waits(synthetic: tuple[Path, dict[str, Any]]) -> None:
    _, report = synthetic
    rejected = by_name(report, "rejected")
    assert warnings(rejected) == {"editor_rejections"}
    assert rejected["findings"][0]["steps"] == [1, 3, 4]  # viewing the file between attempts
    assert rejected["actions"] == {"edit": 3, "view": 1, "validate": 1, "submit": 1}
    idle = by_name(report, "idle")
    assert warnings(idle) == {"idle_wait"}
    assert sorted(f["steps"][0] for f in idle["findings"] if f["kind"] == "idle_wait") == [1, 2]


def test_debug_loops_need_failures_without_a_success_in_between(synthetic: tuple[Path, dict[str, Any]]) -> None:
    _, report = synthetic
    assert warnings(by_name(report, "recovered")) == set()
    looped = by_name(report, "looped")
    assert warnings(looped) == {"debug_loop"} and looped["findings"][0]["steps"] == [1, 3, 5]


def test_cost_per_point_of_improvement_and_money_spent_for_nothing(synthetic: tuple[Path, dict[str, Any]]) -> None:
    runs, report = synthetic
    costly = by_name(report, "costly")
    assert costly["improvement_pct"] == pytest.approx(20.0)  # 0.6 against a 0.5 baseline
    assert costly["cost_per_point"] == pytest.approx(2.0 / 20.0)
    assert "cost_without_improvement" not in {f["kind"] for f in costly["findings"]}
    wasted = by_name(report, "wasted")
    assert wasted["cost_per_point"] is None
    assert {f["kind"] for f in wasted["findings"]} == {"cost_without_improvement", "budget_unused"}
    assert not wasted["flagged"]  # notes give context; they do not flag a run
    group = report["groups"][0]
    assert group["runs"] == 8 and group["cost_usd"] == pytest.approx(2.5)
    # the tables print the cost per point
    proc = rgym("analyze", str(runs), "--no-plots", cwd=runs.parent)
    assert "cost/point" in proc.stdout and "$2.5000" in proc.stdout


def test_analyze_errors_name_the_path(tmp_path: Path) -> None:
    proc = rgym("analyze", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode != 0
    assert "nowhere: no such file or directory" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = rgym("analyze", str(empty), cwd=tmp_path)
    assert proc.returncode == 0 and "no runs to analyse" in proc.stdout


@pytest.mark.parametrize(("command", "kind"), [
    ("python train.py --epochs 3", "run"),
    ("cd src && timeout 60 python -m pytest -x", "run"),
    ("CUDA_VISIBLE_DEVICES=0 nohup python train.py &", "run"),
    ("cat data/train.csv | head -5", "view"),
    ("ls -la", "view"),
    ("sed -n 1,40p train.py", "view"),
    ("grep -rn 'lr' .", "search"),
    ("find . -name '*.py'", "search"),
    ("sed -i 's/0.1/0.01/' train.py", "edit"),
    ("cat > train.py <<'EOF'\nprint(1)\nEOF", "edit"),
    ("echo 'x = 1' >> config.py", "edit"),
    ("printf 'a,b\\n' > data.csv", "edit"),
    ("mv a.py b.py", "edit"),
])
def test_shell_commands_are_classed_like_mlgyms_analysis(command: str, kind: str) -> None:
    assert classify_command(command) == kind, (command, first_program(command))


def test_tools_are_classed() -> None:
    assert classify("rgym/edit", {"path": "a.py"}) == "edit"
    assert classify("rgym/open", {"path": "a.py"}) == "view"
    assert classify("rgym/search_dir", {"term": "lr"}) == "search"
    assert classify("rgym/validate", {}) == "validate"
    assert classify("rgym/submit", {}) == "submit"
    assert classify("literature/search_papers", {"query": "x"}) == "tool"


def test_many_runs_are_read_by_worker_processes_with_the_same_answers(
        synthetic: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    from rgym_view import data
    from rgym_view import runs as view_runs
    from rgym_view.analysis import analyze_paths

    runs, _ = synthetic
    monkeypatch.setenv("RGYM_VIEW_WORKERS", "1")
    serial = analyze_paths([runs]).to_dict()
    rows, trajectories = data.load([runs])
    monkeypatch.setenv("RGYM_VIEW_WORKERS", "2")
    monkeypatch.setattr(view_runs, "PARALLEL_MIN_ITEMS", 2)
    assert analyze_paths([runs]).to_dict() == serial
    assert data.load([runs]) == (rows, trajectories)
    assert len(rows) == 8 and [r["id"] for r in rows] == list(range(8))


def test_plot_axes_never_run_negative_for_non_negative_data(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run costs $0 and no failure mode shows: the cost axis and the count axes
    start at 0, where matplotlib's autoscale would centre them on 0 (-0.06 to 0.06)."""
    from rgym_view import plots
    from rgym_view.analysis import analyze_paths

    runs = tmp_path / "runs"
    for name, score in (("a", 0.6), ("b", 0.7)):
        make_run(runs / name, [_bash("python train.py"), {"tool": "submit", "output": "ok"}],
                 final={"accuracy": score},
                 gradings=[{"step": 2, "kind": "submit", "scores": {"accuracy": score}}])
    report = analyze_paths([runs])
    assert all(r.cost_usd == 0 for r in report.runs)
    seen: dict[str, list[tuple[float, float]]] = {}
    real_save = plots._save

    def capture(fig: Any, folder: Path, name: str) -> list[Path]:
        seen[name] = [ax.get_xlim() for ax in fig.axes if ax.get_visible() and ax.axison]
        return real_save(fig, folder, name)

    monkeypatch.setattr(plots, "_save", capture)
    plots.write_plots(report, tmp_path / "plots")
    assert set(seen) >= {"cost_improvement", "failure_modes", "endings", "action_mix"}
    for name, limits in seen.items():
        for low, high in limits:
            assert low >= 0 and high > low, (name, low, high)

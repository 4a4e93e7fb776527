"""One malformed run in a runs folder never stops the commands that read them all
(issue "One submission", item 5).

Beside good runs of ``rgym/demo`` (a scripted agent, and react on the mock model,
whose steps record model calls), copies of the react run are damaged the ways a
disk, another program or a scaffold could: a token count that is a string, a NaN
and a negative cost, a list where the action belongs, a line of garbage in the
middle of the trajectory, a ``result.json`` that is a list, one with a string token
count and one with a NaN cost; a torn last line (a hard kill) is not damage.
``rgym view``, ``rgym export inspect``, ``rgym analyze``, ``rgym runs`` and ``rgym
score``, run as a user would, exit 0, cover every good run and name each broken one
by one line holding its folder and the field.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import rgym

HONEST = [{"tool": "bash", "args": {"command": "python baseline.py"}}, {"tool": "validate"},
          {"tool": "submit"}]
REPLIES = ["python baseline.py", "validate", "submit"]

Records = list[dict[str, Any]]


def _steps(records: Records) -> list[dict[str, Any]]:
    return [r["step"] for r in records if r["type"] == "step"]


def _first_call(records: Records) -> dict[str, Any]:
    return next(c for s in _steps(records) for c in s["action"]["llm_calls"])


#: name -> (how the trajectory is damaged, how result.json is, what the broken line names)
DAMAGE: dict[str, tuple[Callable[[Records], None] | None, Callable[[Any], Any] | None, str]] = {
    "str-tokens": (lambda rs: _first_call(rs).update(input_tokens="lots"), None,
                   "step.action.llm_calls[0].input_tokens"),
    "nan-cost": (lambda rs: _steps(rs)[0]["action"]["usage"].update(cost_usd=math.nan), None,
                 "step.action.usage.cost_usd"),
    "negative-cost": (lambda rs: _first_call(rs).update(cost_usd=-1.5), None,
                      "step.action.llm_calls[0].cost_usd"),
    "list-action": (lambda rs: _steps(rs)[1].update(action=["bash", "ls"]), None, "step.action"),
    "mid-garbage": (lambda rs: rs.insert(2, "GARBAGE"), None, "line 3"),
    "result-list": (None, lambda data: [data], "(top level)"),
    "result-tokens": (None, lambda data: {**data, "input_tokens": "abc"}, "input_tokens"),
    "result-nan": (None, lambda data: {**data, "cost_usd": math.nan}, "cost_usd"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder: two good runs, a torn one, and the damaged copies of ``DAMAGE``."""
    root = tmp_path_factory.mktemp("broken-runs")
    folder = root / "runs"
    script = root / "honest.json"
    script.write_text(json.dumps(HONEST))
    done = rgym("run", "rgym/demo", "--agent", "scripted", "--agent-option", f"script={script}",
                "--runs-dir", str(folder), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    done = rgym("run", "rgym/demo", "--agent", "react", "--model", "mock/script", "--agent-option",
                "mode=tools", "--agent-option", f"replies={json.dumps(REPLIES)}", "--runs-dir",
                str(folder), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    react = Path(json.loads(done.stdout)["run_dir"])
    react = react if react.is_absolute() else root / react
    assert _first_call(_records(react))  # the react run records its model calls
    torn = react.parent / "torn"
    shutil.copytree(react, torn)
    with (torn / "trajectory.jsonl").open("a") as fh:
        fh.write('{"type": "step", "step": {"index": 9, "act')
    for name, (trajectory, result, _) in DAMAGE.items():
        copy = react.parent / name
        shutil.copytree(react, copy)
        if trajectory is not None:
            records = _records(copy)
            trajectory(records)
            (copy / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        if result is not None:
            data = json.loads((copy / "result.json").read_text())
            (copy / "result.json").write_text(json.dumps(result(data)))
    return folder


def _records(run_dir: Path) -> Records:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines() if line]


def _all(runs: Path) -> list[Path]:
    return sorted(p.parent for p in runs.glob("*/*/*/config.json"))


def _good(runs: Path) -> list[Path]:
    return [p for p in _all(runs) if p.name not in DAMAGE]


def _named(text: str, runs: Path, names: list[str] | None = None, *, only: bool = True) -> None:
    """Each broken run (of ``names``) has one line naming its folder and field (the
    only line naming the run, when ``only``)."""
    assert "Traceback" not in text
    for name in names or list(DAMAGE):
        field = DAMAGE[name][2]
        lines = [line for line in text.splitlines() if f"/{name}" in line]
        assert len([line for line in lines if field in line]) == 1, (name, lines, text[-3000:])
        assert not only or len(lines) == 1, (name, lines)


def test_view_shows_the_good_runs_and_marks_the_broken(runs: Path, tmp_path: Path) -> None:
    page = tmp_path / "view.html"
    done = rgym("view", str(runs), "-o", str(page), "--no-compress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    _named(done.stderr, runs)
    assert f"({len(_all(runs))} runs, {len(DAMAGE)} broken" in done.stdout
    html = page.read_text()
    meta = json.loads(re.search(r'id="rgym-meta">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    trajectories = {int(i): json.loads(t) for i, t in re.findall(
        r'id="traj-(\d+)" data-encoding="json">(.*?)</script>', html, re.S)}
    rows = {Path(r["path"]).name: r for r in meta["runs"]}
    assert sorted(rows) == sorted(p.name for p in _all(runs))
    for path in _good(runs):
        row = rows[path.name]
        assert row["problem"] is None and row["state"] == "complete", row
        steps = trajectories[row["id"]]["steps"]
        assert [s["t"] for s in steps] == ["bash", "validate", "submit"], path.name
    for name, (_, _, field) in DAMAGE.items():
        assert field in rows[name]["problem"] and name in rows[name]["problem"]
        assert trajectories[rows[name]["id"]]["problem"] == rows[name]["problem"]
    assert "NaN" not in html.split('id="rgym-meta">', 1)[1]  # the page's data stays valid JSON


def test_export_inspect_writes_the_good_runs_and_names_the_broken(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "logs"
    done = rgym("export", "inspect", str(runs), "-o", str(out), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    _named(done.stderr, runs)
    written = json.loads(done.stdout)
    assert sorted(Path(w["run_dir"]).name for w in written) == sorted(p.name for p in _good(runs))
    from inspect_ai.log import read_eval_log  # Inspect's own reader (its logs may be zstd)

    for item in written:
        (sample,) = [x for x in read_eval_log(item["log"]).samples or [] if x.epoch == item["epoch"]]
        assert sample.metadata["steps"] == 3


def test_analyze_covers_the_good_runs_and_skips_the_broken(runs: Path, tmp_path: Path) -> None:
    done = rgym("analyze", str(runs), "--json", "--no-plots", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    broken_results = [n for n in DAMAGE if n.startswith("result-")]
    # a broken result.json: the run is analysed from its trajectory, its problem named
    analysed = {Path(r["path"]).name: r for r in report["runs"]}
    assert sorted(analysed) == sorted([p.name for p in _good(runs)] + broken_results)
    for name in broken_results:
        assert analysed[name]["status"] == "corrupt" and DAMAGE[name][2] in analysed[name]["problem"]
        assert analysed[name]["steps"] == 3
    _named("\n".join(report["skipped"]), runs, [n for n in DAMAGE if n not in broken_results])
    _named(done.stderr, runs)
    text = rgym("analyze", str(runs), "--no-plots", cwd=tmp_path)
    assert text.returncode == 0, text.stderr[-3000:]
    _named(text.stdout, runs, only=False)  # "Runs with findings" may name it too


def test_runs_lists_every_run_and_names_the_broken_results(runs: Path, tmp_path: Path) -> None:
    done = rgym("runs", str(runs), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {Path(r["path"]).name: r for r in json.loads(done.stdout)}
    assert sorted(rows) == sorted(p.name for p in _all(runs))
    broken_results = [n for n in DAMAGE if n.startswith("result-")]
    # `rgym runs` reads a finished run's result only: its trajectory is not checked here
    _named(done.stderr, runs, broken_results)
    for name in broken_results:
        assert rows[name]["state"] == "corrupt" and DAMAGE[name][2] in rows[name]["problem"]
    for path in _good(runs):
        assert rows[path.name]["state"] == "complete" and rows[path.name]["problem"] is None
    listed = rgym("runs", str(runs), "--status", "broken", "--json", cwd=tmp_path)
    assert sorted(Path(r["path"]).name for r in json.loads(listed.stdout)) == sorted(broken_results)


def test_score_scores_the_readable_results_and_names_the_broken(runs: Path, tmp_path: Path) -> None:
    done = rgym("score", str(runs), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    broken_results = [n for n in DAMAGE if n.startswith("result-")]
    _named(done.stderr, runs, broken_results)
    assert "react" in done.stdout and "scripted" in done.stdout

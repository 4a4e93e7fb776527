"""The run-directory module: file names, writers and readers (a torn last line),
finding run directories, states, the typed result, and the workspace copy-out."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from rgym_core.agents import BudgetExceeded
from rgym_core.direction import best, better, oriented_ratio, parse_direction, sort_key
from rgym_core.records import EndReason, EpisodeResult, ExitStatus, ScoreRecord
from rgym_core.registry import load_registry
from rgym_core.rundir import (
    ResultMissing,
    RunDir,
    RunDirError,
    RunState,
    TrajectoryWriter,
    create_run_dir,
    export_workspace,
    extract_workspace,
    iter_records,
    iter_run_dirs,
    mount_excludes,
    read_result,
    write_config,
    write_result,
)
from rgym_core.runner import RunConfig, RunError, run_episode
from rgym_core.sandbox import ExecResult
from rgym_core.specs import SubTask


def result(**kw: Any) -> EpisodeResult:
    base: dict[str, Any] = dict(run_id="r1", task_id="p/t", agent="x/a", status=ExitStatus.SUBMITTED)
    base.update(kw)
    return EpisodeResult(**base)


def test_trajectory_torn_last_line_is_skipped_and_cut_before_appending(tmp_path: Path) -> None:
    with TrajectoryWriter(tmp_path) as writer:
        writer.write("start", {"run_id": "r1"})
        writer.score(ScoreRecord(step=1, kind="validate", valid=True, scores={"acc": 0.5}))
    path = tmp_path / "trajectory.jsonl"
    with path.open("a") as fh:
        fh.write('{"type": "step", "step": {"ind')  # a hard kill mid-write
    assert [r["type"] for r in iter_records(tmp_path)] == ["start", "score"]
    assert RunDir(tmp_path).scores()[0].scores == {"acc": 0.5}
    with TrajectoryWriter(tmp_path) as writer:  # `rgym grade` appending to a killed run
        assert writer.repaired == '{"type": "step", "step": {"ind'
        writer.write("end", {})
    assert [r["type"] for r in iter_records(path)] == ["start", "score", "end"]
    with path.open("a") as fh:
        fh.write('{"type": "note"}')  # whole, only the newline missing: kept
    with TrajectoryWriter(tmp_path) as writer:
        assert writer.repaired is None
        writer.write("end", {})
    assert [r["type"] for r in iter_records(path)][-2:] == ["note", "end"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    with pytest.raises(RunDirError, match=r"trajectory\.jsonl: line 2: invalid JSON"):
        list(iter_records(path))


def test_iter_run_dirs_finds_runs_in_run_runs_and_sweep_folders(tmp_path: Path) -> None:
    runs = tmp_path / "sweep"
    (runs / "manifest.json").parent.mkdir()
    (runs / "manifest.json").write_text("{}")
    made = []
    for sub in ("cells/a/run1", "cells/b/deeper/run2", "run3"):
        run = create_run_dir(runs / sub)
        write_result(run.path, result())
        made.append(run.path)
    nested = made[2] / "grader" / "inner"  # a run directory's inside is not searched
    nested.mkdir(parents=True)
    (nested / "result.json").write_text("{}")
    (runs / ".hidden" / "run").mkdir(parents=True)
    (runs / ".hidden" / "run" / "result.json").write_text("{}")
    assert [r.path for r in iter_run_dirs(runs)] == sorted(made)
    assert [r.path for r in iter_run_dirs(made[0])] == [made[0]]
    assert [r.path for r in iter_run_dirs(made[0] / "result.json")] == [made[0]]
    with pytest.raises(RunDirError, match="nowhere: no such file or directory"):
        list(iter_run_dirs(tmp_path / "nowhere"))


def test_states_owner_and_typed_result(tmp_path: Path) -> None:
    run = create_run_dir(tmp_path / "run")
    write_config(run.path, {"run_id": "r1"})
    assert run.owner().pid == os.getpid()
    assert run.state() is RunState.RUNNING  # no result, its process (this one) lives
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    config = run.config()
    config["owner"]["pid"] = int(dead)
    run.config_path.write_text(json.dumps(config))
    assert run.state() is RunState.INCOMPLETE
    config["owner"]["host"] = "elsewhere"
    run.config_path.write_text(json.dumps(config))
    assert run.state() is RunState.RUNNING  # another host: cannot tell, so not "killed"
    with pytest.raises(ResultMissing):
        run.result()
    subtask = SubTask(id="s1", metric="acc", weight=2.0)
    write_result(run.path, result(direction="minimize", subtasks=[subtask],
                                  end_reason=EndReason.TIME, status=ExitStatus.AUTOSUBMITTED_TIME,
                                  profile="cpu"))
    back = run.result()
    assert run.state() is RunState.COMPLETE
    assert back.subtasks == [subtask] and back.direction == "minimize" and back.profile == "cpu"
    assert back.end_reason is EndReason.TIME and back.status is ExitStatus.AUTOSUBMITTED_TIME
    raw = json.loads(run.result_path.read_text())
    raw["direction"] = "sideways"
    run.result_path.write_text(json.dumps(raw))
    with pytest.raises(RunDirError, match=r"result\.json: direction: .*sideways"):
        read_result(run.path)
    assert run.state() is RunState.CORRUPT


def test_end_reasons_statuses_and_budget_errors_are_typed() -> None:
    assert ExitStatus.autosubmitted(EndReason.COST) is ExitStatus.AUTOSUBMITTED_COST
    assert {s.value for s in ExitStatus if s.infrastructure} == {
        "error", "autosubmitted_sandbox_error", "autosubmitted_killed", "cancelled", "ungraded"}
    assert [r.value for r in EndReason if r.budget] == ["max_steps", "time", "cost", "tokens"]
    assert BudgetExceeded("cost").kind is EndReason.COST
    assert BudgetExceeded(EndReason.TOKENS).kind is EndReason.TOKENS
    with pytest.raises(ValueError, match="BudgetExceeded kind must be one of max_steps"):
        BudgetExceeded("money")
    with pytest.raises(ValueError):
        BudgetExceeded(EndReason.SUBMIT)


def test_one_direction_helper() -> None:
    assert better(2, 1, "maximize") and better(1, 2, "minimize") and not better(1, 1, "maximize")
    assert better(0.1, None, "maximize") and not better(math.nan, 0.0, "minimize")
    assert best([3, None, math.nan, 1, 2], "minimize") == 1 and best([], "maximize") is None
    assert sorted([1, 3, 2], key=sort_key("maximize")) == [3, 2, 1]
    assert oriented_ratio(2.0, 4.0, "minimize") == 2.0 and oriented_ratio(1.0, 0.0, "maximize") is None
    assert parse_direction("Max") == "maximize" and parse_direction("minimise") == "minimize"
    with pytest.raises(ValueError, match="expected 'maximize' or 'minimize'"):
        parse_direction("up")


class _LegacySandbox:
    """A backend without ``export_workspace``: copied one entry at a time."""

    workspace = "/ws"

    def __init__(self, root: Path) -> None:
        self.root = root

    def exec(self, argv: list[str], **kw: Any) -> ExecResult:
        return ExecResult(0, "\n".join(sorted(p.name for p in self.root.iterdir())) + "\n")

    def copy_out(self, src: str, dest: Path) -> None:
        source = self.root / src
        if source.is_dir():
            import shutil

            shutil.copytree(source, dest)
        else:
            dest.write_bytes(source.read_bytes())


class _ExportingSandbox(_LegacySandbox):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[dict[str, Any]] = []

    def export_workspace(self, dest: Path, **kw: Any) -> str:
        self.calls.append(kw)
        dest.mkdir()
        (dest / "exported.txt").write_text("one archive")
        return "report"


def test_workspace_copy_out_uses_the_backend_export_when_there_is_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "train.csv").write_text("x")
    (ws / "model.py").write_text("print(1)")
    exporting = _ExportingSandbox(ws)
    assert export_workspace(exporting, tmp_path / "a", exclude=mount_excludes(["data"])) == "report"
    assert exporting.calls == [{"exclude": ("data", "data/**"), "include": None, "quota_bytes": None}]
    assert export_workspace(_LegacySandbox(ws), tmp_path / "b", exclude=["data", "data/**"]) is None
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["model.py"]


def test_extract_workspace_refuses_hostile_archives(tmp_path: Path) -> None:
    def archive(name: str, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tar:
            for info, data in members:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data) if data else None)
        return path

    escape = tarfile.TarInfo("workspace/../../escaped.txt")
    link = tarfile.TarInfo("workspace/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    good_dir = tarfile.TarInfo("workspace")
    good_dir.type = tarfile.DIRTYPE
    out = extract_workspace(archive("ws.tar.gz", [(good_dir, b""),
                                                  (tarfile.TarInfo("workspace/a.txt"), b"ok"),
                                                  (escape, b"x"), (link, b"")]), tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]  # the escape and the link dropped
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(RunDirError, match=r"junk\.tar\.gz: cannot unpack"):
        extract_workspace(tmp_path / "junk.tar.gz", tmp_path / "junk")
    with pytest.raises(RunDirError, match="file not found"):
        extract_workspace(tmp_path / "none.tar.gz", tmp_path / "none")


def test_episode_writes_a_typed_result_and_owner(tmp_path: Path) -> None:
    registry = load_registry()
    config = RunConfig(task="rgym/demo", run_dir=tmp_path / "cells" / "demo-1",
                       archive_workspace=False)
    res = run_episode(config, registry)
    assert res.run_dir == str(tmp_path / "cells" / "demo-1")  # a sweep names its run directories
    with pytest.raises(RunError, match="demo-1: the run directory already exists"):
        run_episode(config, registry)
    run = RunDir(Path(res.run_dir))
    assert run.config()["owner"]["pid"] == os.getpid() and run.state() is RunState.COMPLETE
    back = run.result()
    assert back.end_reason is EndReason.SUBMIT and back.status is ExitStatus.SUBMITTED
    assert back.metrics == {"r2": "maximize", "rmse": "minimize"}
    assert run.identity()["task"] == "rgym/demo"
    assert [r["type"] for r in run.records()][:2] == ["start", "sandbox"]

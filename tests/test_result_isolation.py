"""result.json records how the agent and its sandbox were isolated (typed
``EpisodeResult.isolation``), and ``rgym show RUN_DIR`` prints it on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgym_core.records import IsolationInfo
from rgym_core.rundir import RunDir, read_result
from rgym_core.runner import RunConfig, run_episode
from rgym_core.testing import run_cli


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_the_result_records_agent_and_sandbox_isolation(tmp_path: Path, isolation: str) -> None:
    result = run_episode(RunConfig(task="rgym/demo", agent="baseline", runs_dir=tmp_path,
                                   agent_isolation=isolation))
    assert result.status == "submitted", result.error
    iso = read_result(Path(result.run_dir or "")).isolation
    assert isinstance(iso, IsolationInfo)
    assert iso.agent == isolation
    assert iso.sandbox in ("bubblewrap", "uid", "none")
    assert iso.sandbox_detail
    assert iso.grading in ("bubblewrap+uids", "uids", "bubblewrap", "none")
    if isolation == "process":
        assert iso.agent_confinement in ("bubblewrap+uid", "bubblewrap", "uid")
    else:
        assert iso.agent_confinement is None
    raw = json.loads((Path(result.run_dir or "") / "result.json").read_text())
    assert raw["isolation"]["agent"] == isolation
    shown = run_cli("show", str(result.run_dir))
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.strip().startswith("isolation:"))
    assert f"agent: {isolation}" in line and f"sandbox: {iso.sandbox}" in line
    assert f"grading: {iso.grading}" in line


def test_an_older_result_without_it_reads_as_none(tmp_path: Path) -> None:
    result = run_episode(RunConfig(task="rgym/demo", agent="baseline", runs_dir=tmp_path))
    path = Path(result.run_dir or "") / "result.json"
    data = json.loads(path.read_text())
    del data["isolation"]
    path.write_text(json.dumps(data))
    assert RunDir(path.parent).result().isolation is None
    shown = run_cli("show", str(path.parent))
    assert shown.returncode == 0 and "isolation:" not in shown.stdout


def test_the_summary_line() -> None:
    info = IsolationInfo(agent="process", agent_confinement="uid", sandbox="container",
                         sandbox_detail="container")
    assert info.summary() == "agent: process (uid); sandbox: container"
    assert IsolationInfo(sandbox="uid", sandbox_detail="separate user").summary() == \
        "agent: none; sandbox: uid (separate user)"
    assert IsolationInfo(sandbox="bubblewrap", grading="bubblewrap+uids").summary() == \
        "agent: none; sandbox: bubblewrap; grading: bubblewrap+uids"

"""Grading never leaves an installed pack's files changed.

A run as root used to ``chmod 0700`` the task's ``grader/`` folder (and private dataset
parts) in place, so a later run as a normal user got "Permission denied".  Now
sandboxes with their own view of the file system (bubblewrap, containers) change
nothing; the local sandbox without bubblewrap (agent commands as a pooled uid on the
host's files) closes them to "others" for the episode only and gives every file its
own mode back when the last episode holding it ends, also after a holder was killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from rgym_core import grading, hookimpl
from rgym_core.grade_runs import FolderWorkspace
from rgym_core.grading import Grader
from rgym_core.isolation import hiding
from rgym_core.isolation.hiding import HiddenFromOthers, restore_abandoned
from rgym_core.packs import load_task
from rgym_core.registry import load_registry
from rgym_core.runner import Episode, RunConfig, run_episode

DEMO = Path(grading.__file__).resolve().parent / "demo" / "tasks" / "demo"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root changes modes")


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode)
            for p in [root, *root.rglob("*")]}


@pytest.fixture
def pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the demo task with the modes of a fresh checkout."""
    monkeypatch.setattr(hiding, "GUARD_DIR", tmp_path / "guard")
    folder = tmp_path / "pack" / "demo"
    shutil.copytree(DEMO, folder)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return folder


class UidModeWorkspace(FolderWorkspace):
    """A workspace whose agent commands run as a pooled uid on the host's files."""

    mode = "uid"


def workspace(tmp_path: Path, cls: type[FolderWorkspace] = FolderWorkspace) -> FolderWorkspace:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "submission.csv").write_text("id,y\n")
    return cls(ws)


def test_a_bubblewrap_or_container_episode_changes_no_mode(pack: Path, tmp_path: Path) -> None:
    before = modes(pack)
    grader = Grader(load_task(pack), workspace(tmp_path), {}, tmp_path / "run")
    grader.grade("validate", 1)
    assert modes(pack) == before
    grader.close()
    assert modes(pack) == before


def test_uid_mode_closes_the_grader_to_others_for_the_episode_only(pack: Path, tmp_path: Path) -> None:
    before = modes(pack)
    grader = Grader(load_task(pack), workspace(tmp_path, UidModeWorkspace), {}, tmp_path / "run")
    during = modes(pack / "grader")
    assert during and all(m & 0o007 == 0 for m in during.values())
    assert stat.S_IMODE((pack / "grader").stat().st_mode) == 0o750  # owner and group keep it
    assert {k: v for k, v in modes(pack).items() if not k.startswith("grader")} == \
        {k: v for k, v in before.items() if not k.startswith("grader")}
    record = grader.grade("validate", 1)
    assert record.error is None or "could not" not in record.error
    second = Grader(load_task(pack), workspace(tmp_path, UidModeWorkspace), {}, tmp_path / "run2")
    grader.close()
    assert all(m & 0o007 == 0 for m in modes(pack / "grader").values())  # still held
    second.close()
    assert modes(pack) == before
    assert not list((tmp_path / "guard").glob("*.json"))


KILLED = """
import sys, time
from pathlib import Path
from rgym_core.isolation.hiding import HiddenFromOthers
HiddenFromOthers([Path(sys.argv[1])])
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_is_restored_by_the_next_one(pack: Path, tmp_path: Path) -> None:
    before = modes(pack)
    env = {**os.environ, "RGYM_GUARD_DIR": str(tmp_path / "guard")}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(pack / "grader")], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert stat.S_IMODE((pack / "grader").stat().st_mode) & 0o007 == 0
        assert restore_abandoned() == []  # a live holder: nothing restored
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(0.1)
    assert restore_abandoned() == [str((pack / "grader").resolve())]
    assert modes(pack) == before
    guard = HiddenFromOthers([pack / "grader"])  # and a new holder starts from the true modes
    guard.release()
    assert modes(pack) == before


class TaskPlugin:
    def __init__(self, task: Any) -> None:
        self.task = task

    @hookimpl
    def rgym_register_tasks(self) -> list[Any]:
        return [self.task]


def test_an_agent_process_without_bubblewrap_cannot_read_the_grader_and_modes_come_back(
        pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--agent-isolation process`` as root without bubblewrap runs the scaffold as a
    leased uid on the host's files: the task's hidden files are closed before it starts
    and get their modes back when the episode ends."""
    monkeypatch.setenv("RGYM_BWRAP", "0")
    before = modes(pack)
    task = attrs.evolve(load_task(pack), id="fix/demo-copy")
    registry = load_registry(extra_plugins=[("fix-modes-test", TaskPlugin(task))])
    config = RunConfig(task="fix/demo-copy", agent="baseline", agent_isolation="process",
                       runs_dir=tmp_path / "runs")
    episode = Episode(config, registry)
    episode.prepare()
    try:
        assert all(m & 0o007 == 0 for m in modes(pack / "grader").values())
    finally:
        episode.close()
    assert modes(pack) == before
    result = run_episode(config, registry)
    assert result.status == "submitted", (result.error, result.agent_error)
    assert result.scores[-1].valid, result.scores[-1].error
    assert modes(pack) == before
    assert not list((tmp_path / "guard").glob("*.json"))


def test_a_path_inside_another_is_covered_by_it(pack: Path) -> None:
    before = modes(pack)
    guard = HiddenFromOthers([pack / "grader" / "evaluate.py", pack / "grader", pack / "grader"])
    assert all(m & 0o007 == 0 for m in modes(pack / "grader").values())
    guard.release()
    assert modes(pack) == before

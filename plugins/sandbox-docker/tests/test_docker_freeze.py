"""Stopping the agent of a Docker episode: ``freeze``/``thaw`` (an atomic snapshot for
``validate``), ``kill_processes`` (before the final copy-out) and ``reap`` (what a
``kill -9``'d rgym left running), on real containers, with a writer that keeps
rewriting a file and with a fork bomb that keeps every process slot taken."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from docker_testlib import client_or_skip

from rgym_core.specs import Resources

client_or_skip()
pytestmark = pytest.mark.docker

#: A detached writer: a bash builtin loop (no fork per write) rewriting counter.txt.
WRITER = ("(setsid bash -c 'i=0; while :; do i=$((i+1)); echo $i > counter.txt; done' "
          "</dev/null >/dev/null 2>&1 &); echo started")
WRITER_MARK = "echo $i > counter.txt"
#: A fork bomb that takes every process slot freed, at once, forever.
GREEDY_BOMB = ("(setsid python3 -c '\nimport os, time\nwhile True:\n    try:\n"
               "        if os.fork() == 0:\n            time.sleep(3600); os._exit(0)\n"
               "    except OSError:\n        time.sleep(0.005)\n' </dev/null >/dev/null 2>&1 &); "
               "sleep 2; echo started")


def _read(box: Any, tmp: Path, name: str = "counter.txt") -> str:
    """The file as the copy-out sees it (the path the runner's snapshots take)."""
    dest = tmp / f"copy-{time.monotonic_ns()}"
    box.copy_out(name, dest)
    return dest.read_text()


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _changes(box: Any, tmp: Path) -> bool:
    first = _read(box, tmp)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _read(box, tmp) != first:
            return True
    return False


def _started_writer(make_sandbox: Any, tmp_path: Path, **overrides: Any) -> Any:
    box = make_sandbox(**overrides)
    assert box.run(WRITER, timeout=30).output.strip() == "started"
    _wait_for(lambda: box.run("test -s counter.txt", timeout=30).exit_code == 0, "the writer")
    assert _changes(box, tmp_path), "the writer does not write: the test would prove nothing"
    return box


def test_freeze_stops_the_writer_and_thaw_lets_it_go_on(make_sandbox: Any,
                                                        tmp_path: Path) -> None:
    box = _started_writer(make_sandbox, tmp_path)
    box.freeze()
    try:
        before = _read(box, tmp_path)
        time.sleep(1.0)  # the window the snapshot must hold still for (not a race wait)
        assert _read(box, tmp_path) == before, "a frozen writer went on writing"
    finally:
        box.thaw()
    assert _changes(box, tmp_path), "thaw() did not let the writer go on"


def test_kill_processes_ends_the_writer_and_names_it(make_sandbox: Any,
                                                     tmp_path: Path) -> None:
    box = _started_writer(make_sandbox, tmp_path)
    killed = box.kill_processes()
    assert any(WRITER_MARK in line for line in killed), killed
    assert all(len(line) <= 200 for line in killed)
    assert not _changes(box, tmp_path), "the writer survived kill_processes()"
    assert box.kill_processes() == []  # nothing left (the idle shell session is rgym's)
    report = box.export_workspace(tmp_path / "ws")  # the workspace is still there
    assert (tmp_path / "ws" / "counter.txt").is_file(), report
    assert box.run("echo alive", timeout=30).output.strip() == "alive"


def test_freeze_copy_and_kill_under_a_fork_bomb(make_sandbox: Any, tmp_path: Path) -> None:
    box = make_sandbox(resources=Resources(pids=200))
    box.write_file("submission.csv", "id,y\n1,2\n")
    assert "started" in box.run(GREEDY_BOMB, timeout=30).output
    box.freeze()  # the supervisor needs no new process to stop them...
    try:  # ...nor to copy the workspace while they hold every slot (validate's snapshot)
        box.export_workspace(tmp_path / "frozen")
        assert (tmp_path / "frozen" / "submission.csv").is_file()
        box.export_workspace(tmp_path / "twice")  # the reserve is armed again
    finally:
        box.thaw()
    killed = box.kill_processes()  # ...nor to kill them
    assert sum("os.fork()" in line for line in killed) > 100, len(killed)
    box.export_workspace(tmp_path / "ws")
    assert (tmp_path / "ws" / "submission.csv").read_text() == "id,y\n1,2\n"


@pytest.mark.parametrize("attack", ["writer", "bomb"])
def test_reap_kills_what_a_killed_run_left(make_sandbox: Any, tmp_path: Path,
                                           attack: str) -> None:
    from rgym_sandbox_docker.sandbox import DockerSandbox, export_left_workspace, reap

    box = make_sandbox(resources=Resources(pids=200))
    box.write_file("submission.csv", "id,y\n1,2\n")
    assert "started" in box.run(WRITER if attack == "writer" else GREEDY_BOMB,
                                timeout=30).output
    handle = box.reap_handle()
    assert handle["container"] == box.container.id
    box.shell.close()  # rgym dies: its supervisor session goes, the container stays
    killed = reap(handle)
    mark = WRITER_MARK if attack == "writer" else "os.fork()"
    assert any(mark in line for line in killed), killed[:3]
    again = DockerSandbox.attach(handle)
    try:
        assert again.kill_processes() == []
    finally:
        assert again.shell is not None
        again.shell.close()
    export_left_workspace(handle, tmp_path / "ws")  # what `rgym grade` archives
    assert (tmp_path / "ws" / "submission.csv").is_file()
    assert box.health() is not None  # the container is gone with it


def test_reap_from_the_host_when_no_exec_fits(make_sandbox: Any, tmp_path: Path) -> None:
    """``reap``'s fallback when the bomb leaves no room for an exec: pause, kill the
    agent's processes by host pid, unpause."""
    from rgym_sandbox_docker.sandbox import AGENT_UID, _kill_from_host

    box = make_sandbox(resources=Resources(pids=200))
    box.write_file("submission.csv", "id,y\n1,2\n")
    assert "started" in box.run(GREEDY_BOMB, timeout=30).output
    killed = _kill_from_host(box.container, AGENT_UID)
    assert sum("os.fork()" in line for line in killed) > 100, killed[:3]
    box.container.reload()
    assert box.container.status == "running"
    # what the host killed may still be exiting (the shell among them): gone soon
    _wait_for(lambda: box.kill_processes() == [], "the killed processes to be gone")
    box.export_workspace(tmp_path / "ws")
    assert (tmp_path / "ws" / "submission.csv").is_file()

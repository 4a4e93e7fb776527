"""What a grading costs beyond its grader (issue 27), and the descriptor the grader
is told its control socket has: the supervisor notices the grader's end at once (not
at its next tick), the grader's helpers arrive compiled, and a data file of
bubblewrap never takes the control socket's number."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core import grader_confinement as gc
from rgym_core import grader_protocol as gp
from rgym_core import load_task
from rgym_core.grading import Grader
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout


def trivial_task(tmp: Path, source: str = "") -> Path:
    folder = tmp / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "starter").mkdir()
    (folder / "task.yaml").write_text("id: t/fixed-cost\ndescription: d\n"
                                      "metrics: [{name: acc}]\ngrader: {timeout_s: 60}\n")
    (folder / "grader" / "helper.py").write_text("VALUE = 1.0\n")
    (folder / "grader" / "evaluate.py").write_text(textwrap.dedent(source) or (
        "import sys, os\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
        "from helper import VALUE\n"
        "from rgym_grader_kit import write_scores\n"
        "write_scores({'acc': VALUE})\n"))
    return folder


def grade(tmp: Path, folder: Path) -> Any:
    from rgym_core.sandboxes.local import LocalSandbox

    box = LocalSandbox(SandboxConfig(run_id="grd-fixed-cost"))
    box.start(WorkspaceLayout(starter=folder / "starter"))
    try:
        return Grader(load_task(folder), box, {}, tmp / "run").grade("validate", 1)
    finally:
        box.cleanup()


@pytest.fixture
def slow_tick(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """Supervisors that check worker deadlines only every 20 s."""
    tick = 20.0
    original = gc.host_config

    def with_tick(**kwargs: Any) -> Any:
        manager = original(**kwargs)
        config, fds = manager.__enter__()
        config["tick_s"] = tick

        class Wrapped:
            def __enter__(self) -> tuple[dict[str, Any], list[int]]:
                return config, fds

            def __exit__(self, *exc: object) -> Any:
                return manager.__exit__(*exc)

        return Wrapped()

    monkeypatch.setattr(gc, "host_config", with_tick)
    yield tick


def test_the_supervisor_ends_with_its_grader_not_at_its_next_tick(tmp_path: Path,
                                                                  slow_tick: float) -> None:
    """The grader's pidfd wakes the supervisor: with a 20 s tick, ten gradings of a
    grader that does nothing still take seconds, not ticks."""
    folder = trivial_task(tmp_path)
    started = time.monotonic()
    for _ in range(10):
        record = grade(tmp_path, folder)
        assert record.valid and record.scores == {"acc": 1.0}, record.error
    assert time.monotonic() - started < slow_tick


def test_grader_helpers_arrive_compiled_and_a_changed_source_wins(tmp_path: Path) -> None:
    grader = tmp_path / "grader"
    grader.mkdir()
    (grader / "helper.py").write_text("VALUE = 1\n")
    gp.install_kit(grader)
    assert gp.precompile(grader) >= 5  # helper.py and the kit's modules
    cached = Path(importlib.util.cache_from_source(str(grader / "helper.py")))
    assert cached.is_file()
    # A checked-hash file: the source is edited after compiling, and Python compiles
    # the new source instead of running the old bytecode.
    (grader / "helper.py").write_text("VALUE = 2\n")
    code = (f"import sys; sys.dont_write_bytecode = True; sys.path.insert(0, {str(grader)!r}); "
            "import helper, rgym_grader_kit; print(helper.VALUE)")
    import subprocess

    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "2"


def test_no_data_file_of_bubblewrap_takes_the_control_fd(tmp_path: Path) -> None:
    """The host's next free descriptor is the control socket's number when the
    supervisor's configuration is written: bubblewrap's data files (handed to the
    supervisor under their numbers) must be numbered elsewhere, or the supervisor
    cannot put the grader's socket there and the grading fails."""
    confinement = gc.host_confinement()
    if confinement.bwrap is None:
        pytest.skip("without bubblewrap no data files are handed to the supervisor")
    held: list[int] = []
    try:
        while (fd := os.open(os.devnull, os.O_RDONLY)) < gc.CONTROL_FD:
            held.append(fd)
        os.close(fd)  # the control fd's number is now the lowest free one
        with gc.host_config(eval_root=tmp_path / "eval", work_parent=tmp_path / "work",
                            entry="evaluate.py", kind="validate", seed=None, env={},
                            timeout=60, confinement=confinement, grader_uid=None,
                            worker_uid=None, nonce="n") as (config, fds):
            assert fds and gc.CONTROL_FD not in fds
            assert gc.CONTROL_FD not in config["grader_pass_fds"]
            assert gc.CONTROL_FD not in config["workers"]["template_fds"]
            assert all(str(fd) in config["grader_argv"] for fd in config["grader_pass_fds"])
    finally:
        for fd in held:
            os.close(fd)


def _supervisor_module() -> Any:
    spec = importlib.util.spec_from_file_location("rgym_test_supervisor", gp.supervisor_script())
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_place_never_overwrites_a_descriptor_in_use() -> None:
    sup = _supervisor_module()
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keep = os.open(os.devnull, os.O_RDONLY)
    try:
        with pytest.raises(RuntimeError, match="already in use"):
            sup._place(child, keep, avoid=[keep])
        assert os.fstat(keep) and child.fileno() >= 0  # neither closed nor detached
        moved = sup._off(parent, parent.fileno())
        assert moved.fileno() != keep and moved is not parent and parent.fileno() == -1
        fd = sup._place(child, 200, avoid=[moved.fileno()])
        assert fd == 200 and child.fileno() == -1
        os.write(fd, b"x")
        assert moved.recv(1) == b"x"
        os.close(fd)
        moved.close()
    finally:
        os.close(keep)


def test_a_lease_prefers_a_uid_under_which_nothing_runs(tmp_path: Path) -> None:
    """A released uid whose last process is still exiting (or was left running) is
    not handed to the next grading while another free uid has none."""
    if os.geteuid() != 0:
        pytest.skip("uid leases switch users only as root")
    import subprocess

    from rgym_core.isolation.users import kill_uid_processes, lease

    pool = range(62120, 62122)

    def demote() -> None:
        os.setgroups([])
        os.setresgid(pool[0], pool[0], pool[0])
        os.setresuid(pool[0], pool[0], pool[0])

    proc = subprocess.Popen(["sleep", "60"], preexec_fn=demote)
    try:
        for _ in range(8):  # the start uid is drawn at random
            held = lease(pool, lock_dir=tmp_path, clean=False)
            assert held.uid == pool[1]
            held.release(clean=False)
        # With the idle uid held, the busy one is leased, its process killed first.
        other = lease(pool, lock_dir=tmp_path, clean=False)
        try:
            assert other.uid == pool[1]
            held = lease(pool, lock_dir=tmp_path)
            assert held.uid == pool[0] and proc.wait(timeout=10) == -9
            held.release(clean=False)
        finally:
            other.release(clean=False)
    finally:
        kill_uid_processes(pool[0])
        proc.kill()
        proc.wait()

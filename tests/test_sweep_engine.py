"""The sweep engine in this process: retries of infrastructure failures (a sandbox
that fails to start), the per-model limit on concurrent requests, and episodes
that run at the same time without sharing a user, a workspace or a port."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from rgym_core.hookspecs import hookimpl
from rgym_core.isolation import bwrap_problem  # noqa: F401 - in skipif strings
from rgym_core.registry import load_registry
from rgym_core.rundir import RunDir, iter_run_dirs
from rgym_core.sandbox import SandboxError, SandboxSpec
from rgym_core.sandboxes.local import LocalSandbox
from rgym_core.sweep import SweepSession, SweepSpec
from rgym_core.sweep.folder import SweepFolder


class FlakySandbox(LocalSandbox):
    """The local sandbox, but the first ``failures`` starts fail as a broken machine would."""

    failures = 0
    lock = threading.Lock()

    def start(self, layout: Any) -> None:
        with FlakySandbox.lock:
            fail = FlakySandbox.failures > 0
            FlakySandbox.failures -= 1
        if fail:
            raise SandboxError("the machine ran out of something", reason="test")
        super().start(layout)


class FlakyPlugin:
    @hookimpl
    def rgym_register_sandboxes(self) -> list[SandboxSpec]:
        return [SandboxSpec(name="flaky/flaky-local", factory=FlakySandbox, description="fails on purpose")]


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry(extra_plugins=[("flaky", FlakyPlugin())])


def sweep(registry: Any, folder: Path, spec: SweepSpec, **options: Any) -> tuple[int, SweepSession]:
    session = SweepSession(registry=registry, spec=spec, sweep_dir=folder, **options)
    return session.run(quiet=True), session


def test_infrastructure_failures_are_retried(registry: Any, tmp_path: Path) -> None:
    spec = SweepSpec(tasks=["rgym/demo"], agents=["baseline"], seeds=[1], run={"sandbox": "flaky/flaky-local"})
    FlakySandbox.failures = 1
    code, _ = sweep(registry, tmp_path / "a", spec, retry_errors=1)
    assert code == 0
    folder = SweepFolder(tmp_path / "a")
    (cell,) = folder.manifest_cells()
    assert folder.state(cell).state.value == "done"
    assert [reason for _, reason in folder.attempts(cell)] == ["failed-error"]
    failed = RunDir(folder.attempts_dir / cell.key / "1-failed-error").result()
    assert failed.status.value == "error" and "ran out of something" in (failed.error or "")


def test_a_failure_beyond_the_retries_is_retried_by_a_later_run(registry: Any, tmp_path: Path) -> None:
    spec = SweepSpec(tasks=["rgym/demo"], agents=["baseline"], seeds=[1], run={"sandbox": "flaky/flaky-local"})
    FlakySandbox.failures = 5
    code, session = sweep(registry, tmp_path / "b", spec, retry_errors=0)
    assert code == 1
    folder = SweepFolder(tmp_path / "b")
    (cell,) = folder.manifest_cells()
    assert folder.state(cell).state.value == "failed"
    code, _ = sweep(registry, tmp_path / "b", spec, retry_errors=0)  # still no retry allowed
    assert code == 1 and folder.attempts(cell) == []
    FlakySandbox.failures = 0
    code, _ = sweep(registry, tmp_path / "b", spec, retry_errors=1)
    assert code == 0 and folder.state(cell).state.value == "done"
    assert [reason for _, reason in folder.attempts(cell)] == ["failed-error"]


def test_max_connections_bounds_requests_per_model(registry: Any, tmp_path: Path) -> None:
    spec = SweepSpec(tasks=["rgym/demo"], agents=["react"], models=["mock/script"], seeds=[1, 2, 3],
                     run={"agent_options": {"replies": ["python baseline.py", "submit"], "latency_s": 0.3}})
    code, session = sweep(registry, tmp_path / "c", spec, max_parallel=3, max_connections=1)
    assert code == 0
    assert session.engine is not None
    limiter = session.engine.executor.limiter  # type: ignore[attr-defined]
    assert limiter.peak == {"mock/script": 1}
    assert len(list(iter_run_dirs(tmp_path / "c"))) == 3


@pytest.mark.skipif("bwrap_problem() is not None", reason="bubblewrap unusable here")
def test_concurrent_episodes_share_no_user_workspace_or_port(registry: Any, tmp_path: Path) -> None:
    bind = ("python -c 'import socket, time; s = socket.socket(); s.bind((\"127.0.0.1\", 8765)); "
            "s.listen(1); print(\"bound\", flush=True); time.sleep(6)'")
    spec = SweepSpec(tasks=["rgym/demo"], agents=["react"], models=["mock/script"], seeds=[1, 2, 3],
                     run={"agent_options": {"replies": ["id -u; pwd; ls", bind, "submit"]}})
    code, _ = sweep(registry, tmp_path / "d", spec, max_parallel=3)
    assert code == 0
    seen = []
    for run in iter_run_dirs(tmp_path / "d"):
        steps = run.steps()
        uid, where = steps[0].observation.output.split()[:2]
        sandbox = next(r for r in run.records() if r["type"] == "sandbox")
        assert "bound" in steps[1].observation.output, steps[1].observation.output
        seen.append((uid, sandbox["host_workspace"], steps[1].started_at,
                     steps[1].started_at + steps[1].duration_s))
    assert len({s[1] for s in seen}) == 3  # three workspaces
    import os

    if os.geteuid() == 0:  # root: each episode runs as a uid leased for it alone
        assert len({s[0] for s in seen}) == 3
    # the three binds of one port overlapped in time: each episode has its own network
    overlaps = sum(1 for i, a in enumerate(seen) for b in seen[i + 1:] if a[2] < b[3] and b[2] < a[3])
    assert overlaps >= 1, json.dumps(seen)

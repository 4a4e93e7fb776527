"""The sweep matrix: seeds, globs, profiles, agents with and without models, cell
names, the folder's states and manifest (no episode runs here)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from rgym_core.registry import load_registry
from rgym_core.sweep.executors import ConnectionLimiter, file_lock
from rgym_core.sweep.folder import CellState, SweepFolder, SweepLocked
from rgym_core.sweep.matrix import Cell, SweepError, SweepSpec, cell_config, expand, parse_seeds


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry()


def test_seeds() -> None:
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    assert parse_seeds([5, "8-9"]) == [5, 8, 9]
    for bad, message in (("3-1", "is empty"), ("a", "not a seed"), ("1,1", "given twice")):
        with pytest.raises(SweepError, match=message):
            parse_seeds(bad)


def test_globs_exclude_profiles_and_agents(registry) -> None:  # type: ignore[no-untyped-def]
    spec = SweepSpec(tasks=["mlgym/*"], exclude=["mlgym/blotto", "*maze*"],
                     agents=["baseline", "react"], models=["mock/submit", "mock/baseline"], seeds=[1, 2])
    cells = expand(spec, registry)
    tasks = sorted({c.task for c in cells})
    assert "mlgym/blotto" not in tasks and "mlgym/meta-maze" not in tasks and "mlgym/titanic" in tasks
    per_task = [c for c in cells if c.task == "mlgym/titanic"]
    # baseline takes no model: once per seed; react: per model and seed
    assert sorted((c.agent, c.model, c.seed) for c in per_task) == [
        ("baseline/baseline", None, 1), ("baseline/baseline", None, 2),
        ("react/react", "mock/baseline", 1), ("react/react", "mock/baseline", 2),
        ("react/react", "mock/submit", 1), ("react/react", "mock/submit", 2)]
    rl = [c for c in cells if c.task == "mlgym/breakout-minatar"]
    assert {c.profile for c in rl} == {registry.task("mlgym/breakout-minatar").default_profile_name}
    assert len({c.key for c in cells}) == len(cells)


def test_profile_axis(registry) -> None:  # type: ignore[no-untyped-def]
    cells = expand(SweepSpec(tasks=["mlgym/breakout-minatar", "mlgym/titanic"], agents=["baseline"],
                             profiles=["cpu", "mlgym"]), registry)
    assert sorted((c.task, c.profile) for c in cells) == [
        ("mlgym/breakout-minatar", "cpu"), ("mlgym/breakout-minatar", "mlgym"), ("mlgym/titanic", None)]
    with pytest.raises(SweepError, match="has no profile gpu; its profiles: cpu, mlgym"):
        expand(SweepSpec(tasks=["mlgym/breakout-minatar"], agents=["baseline"], profiles=["gpu"]), registry)


def test_errors_name_the_fix(registry) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SweepError, match="'nosuch/\\*' matches no installed task"):
        expand(SweepSpec(tasks=["nosuch/*"]), registry)
    with pytest.raises(SweepError, match="no task left to run"):
        expand(SweepSpec(tasks=["rgym/demo"], exclude=["rgym/*"]), registry)
    with pytest.raises(SweepError, match="unknown agent"):
        expand(SweepSpec(tasks=["rgym/demo"], agents=["nosuch"]), registry)
    with pytest.raises(SweepError, match="unknown key\\(s\\) seed"):
        SweepSpec.from_data({"tasks": ["rgym/demo"], "seed": 1}, where="s.yaml")
    with pytest.raises(SweepError, match="s.yaml: run: unknown option\\(s\\) max_step"):
        SweepSpec.from_data({"tasks": ["rgym/demo"], "run": {"max_step": 3}}, where="s.yaml")


def test_cell_names_are_deterministic() -> None:
    assert Cell("mlgym/blotto", "baseline/baseline", seed=1).key == "mlgym__blotto/baseline/seed-1"
    assert Cell("mlgym/blotto", "react/react", "mock/submit", seed=2, repeat=3, profile="cpu").key == \
        "mlgym__blotto@cpu/react__mock_submit/seed-2_r3"
    assert Cell("rgym/demo", "rgym/scripted", repeat=2).key == "rgym__demo/scripted/run-2"


def test_cell_config_and_fingerprint(tmp_path: Path) -> None:
    spec = SweepSpec(tasks=["rgym/demo"], seeds=[4], run={"max_steps": 3, "data_dir": "/data"})
    config = cell_config(Cell("rgym/demo", "rgym/scripted", seed=4), spec, tmp_path / "c")
    assert (config.seed, config.grader_seed, config.max_steps, config.run_dir) == (4, 4, 3, tmp_path / "c")
    assert config.tags["sweep_cell"] == "rgym__demo/scripted/seed-4"
    other = SweepSpec(tasks=["rgym/demo"], seeds=[4], run={"max_steps": 3, "data_dir": "/elsewhere"})
    assert spec.fingerprint() == other.fingerprint()  # where the data lives changes no episode
    assert spec.fingerprint() != SweepSpec(tasks=["rgym/demo"], run={"max_steps": 4}).fingerprint()
    # an option given at rgym run's default is the same sweep as one not given
    explicit = SweepSpec(tasks=["rgym/demo"], run={"sandbox": "local", "tools": [], "agent_isolation": "none"})
    assert explicit.identity() == SweepSpec(tasks=["rgym/demo"]).identity()


def _write_run(path: Path, result: dict | None, owner_pid: int) -> None:
    path.mkdir(parents=True)
    owner = {"host": os.uname().nodename, "pid": owner_pid, "identity": None}
    (path / "config.json").write_text(json.dumps({"run_id": "x", "owner": owner}))
    (path / "trajectory.jsonl").write_text("")
    if result is not None:
        (path / "result.json").write_text(json.dumps(result))


def test_folder_states_and_retirement(tmp_path: Path) -> None:
    folder = SweepFolder(tmp_path / "sweep")
    folder.create()
    cells = [Cell("rgym/demo", "rgym/scripted", seed=s) for s in range(5)]
    base = {"run_id": "x", "task_id": "rgym/demo", "agent": "rgym/scripted", "sandbox": "rgym/local",
            "primary_metric": "r2"}
    _write_run(folder.cell_dir(cells[1]), {**base, "status": "submitted"}, 1)
    _write_run(folder.cell_dir(cells[2]), {**base, "status": "error"}, 1)
    _write_run(folder.cell_dir(cells[3]), None, 999_999_999)  # its writer is gone: killed
    _write_run(folder.cell_dir(cells[4]), None, os.getpid())  # its writer lives
    states = [folder.state(c).state for c in cells]
    assert states == [CellState.MISSING, CellState.DONE, CellState.FAILED, CellState.LEFTOVER,
                      CellState.RUNNING]
    moved = folder.retire(cells[2], "failed-error")
    assert moved is not None and moved.name == "1-failed-error" and folder.failed_attempts(cells[2]) == 1
    assert folder.state(cells[2]).state is CellState.MISSING
    from rgym_core.rundir import iter_run_dirs

    assert sorted(r.path.name for r in iter_run_dirs(folder.path)) == ["seed-1", "seed-3", "seed-4"]


def test_one_sweep_per_folder(tmp_path: Path) -> None:
    folder = SweepFolder(tmp_path / "s")
    with folder.locked():
        with pytest.raises(SweepLocked, match="another rgym sweep is running on this folder"):
            with SweepFolder(tmp_path / "s").locked():
                pass
    with folder.locked():  # released
        pass


def test_manifest_refuses_other_options(tmp_path: Path) -> None:
    folder = SweepFolder(tmp_path / "s")
    folder.create()
    cells = [Cell("rgym/demo", "rgym/scripted", seed=1)]
    folder.write_manifest(SweepSpec(tasks=["rgym/demo"], run={"max_steps": 3}), cells, executor="local")
    more = [Cell("rgym/demo", "rgym/scripted", seed=2)]
    every = folder.write_manifest(SweepSpec(tasks=["rgym/demo"], run={"max_steps": 3}), more,
                                  executor="local")
    assert every == cells + more  # a sweep may grow
    with pytest.raises(SweepError, match=r"other options \(max_steps: 3 -> 5\)"):
        folder.write_manifest(SweepSpec(tasks=["rgym/demo"], run={"max_steps": 5}), cells, executor="local")


def test_file_lock_serialises_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_CACHE_DIR", str(tmp_path))
    inside, overlaps = [], []

    def work() -> None:
        with file_lock("dataset-x.lock"):
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(1)
            time.sleep(0.05)
            inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps


def test_connection_limiter_bounds_concurrent_requests() -> None:
    limiter = ConnectionLimiter(2)

    class Client:
        provider, model = "mock", "m"

        def complete(self, *args: object, **kwargs: object) -> str:
            time.sleep(0.05)
            return "ok"

    clients = [Client() for _ in range(6)]

    class Agent:
        def __init__(self, client: Client) -> None:
            self.client = client

    for c in clients:
        limiter.wrap(Agent(c))
    threads = [threading.Thread(target=c.complete) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert limiter.peak["mock/m"] == 2

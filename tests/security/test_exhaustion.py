"""Exhaustion attacks on whole episodes: an agent that uses up its processes, memory
or disk must not take rgym's own control with it.  The final copy-out and grading
still happen, the workspace is archived, and the episode ends graded or as the
agent's own failure, never with a status that ``rgym sweep --retry-errors`` retries
(an agent must not buy itself another try by breaking its sandbox).

Docker episodes run under ``--pids 200`` / ``--memory`` / a small workspace quota;
the local sandbox (bubblewrap or uid mode, whichever is the default here) gets the
same fork bomb and disk filler.
"""

from __future__ import annotations

import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.records import Action, EpisodeResult, ExitStatus
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, run_episode
from rgym_core.testing import ScriptAgent

REPO = Path(__file__).resolve().parents[2]

#: A fork bomb that outlives the command that started it (its own session, no
#: terminal) and never gives up: every process slot freed is taken again at once, so
#: the pids stay exhausted while the agent goes on, validates and submits.
DETACHED_BOMB = ("(setsid python3 -c '\n"
                 "import os, time\n"
                 "while True:\n"
                 "    try:\n"
                 "        if os.fork() == 0:\n"
                 "            time.sleep(3600); os._exit(0)\n"
                 "    except OSError:\n"
                 "        time.sleep(0.005)\n"
                 "' </dev/null >/dev/null 2>&1 &); sleep 2; echo started")
#: A memory hog that grows until the OOM killer stops it.
MEMORY_HOG = "python3 -c 'a = []\nwhile True: a.append(bytearray(32 << 20))'"
#: A disk filler that writes until the workspace is full (real blocks, not sparse).
DISK_FILLER = "dd if=/dev/zero of=filler.bin bs=1M status=none; echo filled; ls"


@pytest.fixture(scope="module")
def registry() -> Any:
    return load_registry()


def _archived_names(result: EpisodeResult) -> set[str]:
    archive = Path(str(result.run_dir)) / "workspace.tar.gz"
    assert archive.is_file(), f"no workspace archive in {result.run_dir}"
    with tarfile.open(archive) as tar:
        return {m.name.removeprefix("./").removeprefix("workspace/") for m in tar.getmembers()}


def assert_agents_own_outcome(result: EpisodeResult) -> None:
    """Graded (or the agent's failure), never an infrastructure status, and archived."""
    assert not result.status.infrastructure, (result.status, result.end_reason, result.error)
    assert result.status.graded, (result.status, result.end_reason, result.error)
    assert result.final_scores, (result.status, result.error)
    assert "submission.csv" in _archived_names(result)
    assert_sweep_keeps_it(result)


def assert_sweep_keeps_it(result: EpisodeResult) -> None:
    """The sweep folder reads the run as done: ``--retry-errors`` does not run it again."""
    from types import SimpleNamespace

    from rgym_core.sweep.folder import CellState, SweepFolder

    run_dir = Path(str(result.run_dir))
    cell: Any = SimpleNamespace(key=run_dir.name)  # the folder only reads the cell's key
    assert SweepFolder(run_dir.parent).state(cell).state is CellState.DONE


def _episode(registry: Any, tmp_path: Path, *actions: Action, **config: Any) -> EpisodeResult:
    agent = ScriptAgent(Action.bash("python baseline.py"), *actions)
    return run_episode(RunConfig(task="rgym/demo", runs_dir=tmp_path / "runs", **config),
                       registry, agent=agent)


# -- Docker --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docker_config() -> Iterator[dict[str, Any]]:
    """RunConfig fields of a Docker episode on the local test image (test-labelled)."""
    sys.path.insert(0, str(REPO / "plugins" / "sandbox-docker" / "tests"))
    from docker_testlib import TEST_LABELS, episode_image

    mp = pytest.MonkeyPatch()
    mp.setenv("RGYM_DOCKER_LABELS", ",".join(f"{k}={v}" for k, v in TEST_LABELS.items()))
    yield {"sandbox": "docker", "image": episode_image(), "action_timeout_s": 15}
    mp.undo()


@pytest.mark.docker
@pytest.mark.parametrize("attempt", range(5))
def test_docker_fork_bomb_leaves_rgym_in_control(registry: Any, tmp_path: Path, attempt: int,
                                                 docker_config: dict[str, Any]) -> None:
    result = _episode(registry, tmp_path, Action.bash(DETACHED_BOMB), Action.bash("echo after"),
                      Action(tool="validate"), Action(tool="submit"), pids=200, **docker_config)
    assert_agents_own_outcome(result)


@pytest.mark.docker
def test_docker_memory_hog_is_the_agents_failure(registry: Any, tmp_path: Path,
                                                 docker_config: dict[str, Any]) -> None:
    agent_actions = (Action.bash(MEMORY_HOG), Action.bash("echo after-hog"),
                     Action(tool="submit"))
    result = _episode(registry, tmp_path, *agent_actions, memory_mb=512, **docker_config)
    assert_agents_own_outcome(result)


@pytest.mark.docker
def test_docker_disk_filler_is_the_agents_failure(registry: Any, tmp_path: Path,
                                                  docker_config: dict[str, Any]) -> None:
    result = _episode(registry, tmp_path, Action.bash(DISK_FILLER), Action(tool="validate"),
                      Action(tool="submit"), sandbox_options={"disk_mb": 200},
                      memory_mb=1024, **docker_config)
    assert not result.status.infrastructure, (result.status, result.error)
    assert_sweep_keeps_it(result)
    # the workspace is at its quota: graded, or refused as over quota (the agent's doing)
    assert result.status.graded or result.status in (ExitStatus.SUBMISSION_MISSING,
                                                     ExitStatus.EVALUATION_ERROR), result.status
    assert (Path(str(result.run_dir)) / "result.json").is_file()


# -- the local sandbox ---------------------------------------------------------------------


def test_local_fork_bomb_does_not_stop_the_final_grading(registry: Any, tmp_path: Path) -> None:
    result = _episode(registry, tmp_path, Action.bash(DETACHED_BOMB), Action.bash("echo after"),
                      Action(tool="submit"), pids=200, action_timeout_s=15)
    assert_agents_own_outcome(result)


def test_local_disk_filler_does_not_stop_the_final_grading(registry: Any,
                                                           tmp_path: Path) -> None:
    # past the workspace quota (2 GiB by default), in real blocks
    filler = ("for n in 1 2; do dd if=/dev/zero of=filler$n.bin bs=1M count=1100 status=none; "
              "done; echo filled")
    result = _episode(registry, tmp_path, Action.bash(filler), Action(tool="submit"),
                      action_timeout_s=120)
    assert not result.status.infrastructure, (result.status, result.error)
    assert result.status in (ExitStatus.EVALUATION_ERROR, ExitStatus.SUBMISSION_MISSING), \
        (result.status, result.error)
    assert "quota" in (result.scores[-1].error or ""), result.scores[-1]
    assert_sweep_keeps_it(result)

"""The grading attacks of ``test_grader_attacks.py`` on the Docker sandbox: graders
with ``location: sandbox`` run in a separate grader container, under the grading
supervisor (root in that container), which runs the grader and every worker as
unprivileged uids of their own."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "plugins" / "sandbox-docker" / "tests"))

from docker_testlib import TEST_LABELS, client_or_skip, episode_image  # noqa: E402
from test_grader_attacks import (  # noqa: E402
    WORKER_ABUSE,
    assert_no_survivor,
    attack_detached_rewrite,
    attack_fake_decisions,
    attack_snoop_grader,
    attack_worker,
    confined,
    moms_decisions,
)

from rgym_core import grader_protocol as gp  # noqa: E402
from rgym_core.sandbox import Sandbox, SandboxConfig, WorkspaceLayout  # noqa: E402
from rgym_core.specs import PreparedDataset  # noqa: E402

client_or_skip()
pytestmark = pytest.mark.docker


@pytest.fixture
def docker_box() -> Iterator:  # type: ignore[type-arg]
    """A maker of started Docker sandboxes, all removed when the test ends."""
    from rgym_sandbox_docker.sandbox import DockerSandbox

    from rgym_core import load_task

    made: list[Sandbox] = []

    def make(task_dir: Path, datasets: Mapping[str, PreparedDataset]) -> Sandbox:
        task = load_task(task_dir)
        box = DockerSandbox(SandboxConfig(run_id=f"grd-{uuid.uuid4().hex[:8]}", image=episode_image(),
                                          labels=dict(TEST_LABELS), resources=task.resources))
        made.append(box)
        box.start(WorkspaceLayout(starter=task.path(task.starter_files), datasets=dict(datasets)))
        return box

    yield make
    for box in made:
        box.cleanup()


@pytest.fixture
def token() -> str:
    return f"grd-docker-{uuid.uuid4().hex}"


def test_docker_grading_is_confined_and_a_detached_rewriter_changes_nothing(
        tmp_path: Path, token: str, docker_box) -> None:  # type: ignore[no-untyped-def]
    record = attack_detached_rewrite(tmp_path, token, sandbox=docker_box)
    assert record.valid, record.error
    assert record.scores["Score"] <= 5.0
    assert confined(record) is True, "the grader container's supervisor did not run as root"


def test_docker_strategy_reads_neither_grader_code_nor_seed(
        tmp_path: Path, token: str, docker_box) -> None:  # type: ignore[no-untyped-def]
    record = attack_snoop_grader(tmp_path, token, sandbox=docker_box)
    assert record.valid, record.error
    assert confined(record) is True


def test_docker_heuristic_cannot_see_labels_nor_report_its_own_count(
        tmp_path: Path, token: str, docker_box) -> None:  # type: ignore[no-untyped-def]
    record = attack_fake_decisions(tmp_path, token, sandbox=docker_box)
    assert record.valid, record.error
    assert record.scores["Decisions"] == moms_decisions()


@pytest.mark.parametrize("kind", ["fork_bomb", "memory", "detached", "kill_all"])
def test_docker_abusive_workers_end_cleanly(tmp_path: Path, token: str, kind: str,
                                            docker_box) -> None:  # type: ignore[no-untyped-def]
    record = attack_worker(kind, tmp_path, token, sandbox=docker_box)
    expected = WORKER_ABUSE[kind][1]
    if kind == "kill_all" and record.valid:
        expected = None  # no pid namespace per worker here: kill(-1) reached only its own uid
    if expected is None:
        assert record.valid and record.scores == {"acc": 1.0}, record.error
    else:
        assert not record.valid and expected in (record.error or ""), record.error
    assert confined(record) is True
    assert_no_survivor(token)  # nothing leaked onto the host either


def test_the_protocol_mount_is_the_core_constant() -> None:
    from rgym_sandbox_docker import sandbox

    assert sandbox.EVAL_DIR == gp.EVAL_MOUNT == "/eval"

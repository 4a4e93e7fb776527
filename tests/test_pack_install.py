"""A pack installed with pip appears under its distribution; uninstalled, it is
gone; a pack that raises on import gives one warning and the rest works.

The packs go into a throwaway virtual environment layered on the running one
(:class:`rgym_core.testing.venvs.ChildEnv`), so these tests pass alike in a
fresh venv, in the system interpreter and in CI, and never change the
environment running them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rgym_core.testing import run_cli, run_json
from rgym_core.testing.venvs import ChildEnv

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def child() -> Iterator[ChildEnv]:
    with ChildEnv.temporary() as env:  # episodes run in it: not under pytest's private /tmp folder
        yield env


def task_names(env: ChildEnv) -> dict[str, str]:
    return {row["name"]: row["distribution"] for row in run_json("list", "tasks", python=env.python,
                                                                  cwd=REPO)}


def test_install_list_uninstall(child: ChildEnv) -> None:
    assert "example/echo" not in task_names(child)
    child.pip("install", "--no-deps", "--no-build-isolation", str(REPO / "tests" / "example_pack"))
    try:
        names = task_names(child)
        assert names["example/echo"] == "rgym-task-example"
        assert names["rgym/demo"] == "rgym-core"
    finally:
        child.pip("uninstall", "--yes", "rgym-task-example")
    assert "example/echo" not in task_names(child)


def test_broken_pack_warns_and_rest_works(child: ChildEnv, tmp_path: Path) -> None:
    child.pip("install", "--no-deps", "--no-build-isolation", str(REPO / "tests" / "broken_pack"))
    try:
        proc = run_cli("list", "tasks", python=child.python, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if "rgym-task-broken" in line]
        assert len(warnings) == 1, proc.stderr
        assert "failed to load" in warnings[0] and "broken on purpose" in warnings[0]
        assert "rgym/demo" in proc.stdout
        run = run_cli("run", "rgym/demo", "--runs-dir", str(tmp_path / "runs"), "--quiet",
                      python=child.python, cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        # Restricting the plugins that load silences it.
        quiet = run_cli("--disable-plugin", "broken", "list", "tasks", python=child.python, cwd=REPO)
        assert "rgym-task-broken" not in quiet.stderr
        env_only = run_cli("list", "tasks", python=child.python, cwd=REPO, env={"RGYM_PLUGINS": "builtin"})
        assert "rgym-task-broken" not in env_only.stderr
    finally:
        child.pip("uninstall", "--yes", "rgym-task-broken")


def test_install_hint_names_a_disabled_pack(child: ChildEnv) -> None:
    """What a pack declares (entry-point group ``rgym.provides``) is read without
    importing it: a disabled pack is named with the reason."""
    child.pip("install", "--no-deps", "--no-build-isolation", str(REPO / "tests" / "example_pack"))
    try:
        proc = run_cli("--disable-plugin", "example", "show", "example/echo", python=child.python, cwd=REPO)
        assert proc.returncode == 2
        assert "it comes with the rgym-task-example pack, which is installed but disabled" in proc.stderr
    finally:
        child.pip("uninstall", "--yes", "rgym-task-example")


def test_example_pack_passes_check_pack() -> None:
    proc = run_cli("check-pack", str(REPO / "tests" / "example_pack"), cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pack OK" in proc.stdout
    assert "baseline accuracy: measured 0, recorded 0" in proc.stdout

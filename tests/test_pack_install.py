"""A pack installed with pip appears under its distribution; uninstalled, it is
gone; a pack that raises on import gives one warning and the rest works."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import REPO, run_cli, run_json


@pytest.fixture(scope="module")
def env_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A throwaway virtual environment that sees this one's packages (rgym-core included)."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(root)
    return str(root / "bin" / "python")


def pip(python: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "--quiet", "--disable-pip-version-check",
                    *args], check=True, timeout=300)


def task_names(python: str) -> dict[str, str]:
    return {row["name"]: row["distribution"] for row in run_json("list", "tasks", python=python)}


def test_install_list_uninstall(env_python: str) -> None:
    assert "example/echo" not in task_names(env_python)
    pip(env_python, "install", "--no-deps", "--no-build-isolation", str(REPO / "tests" / "example_pack"))
    try:
        names = task_names(env_python)
        assert names["example/echo"] == "rgym-task-example"
        assert names["rgym/demo"] == "rgym-core"
    finally:
        pip(env_python, "uninstall", "--yes", "rgym-task-example")
    assert "example/echo" not in task_names(env_python)


def test_broken_pack_warns_and_rest_works(env_python: str, runs_dir: Path) -> None:
    pip(env_python, "install", "--no-deps", "--no-build-isolation", str(REPO / "tests" / "broken_pack"))
    try:
        proc = run_cli("list", "tasks", python=env_python)
        assert proc.returncode == 0, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if "rgym-task-broken" in line]
        assert len(warnings) == 1, proc.stderr
        assert "failed to load" in warnings[0] and "broken on purpose" in warnings[0]
        assert "rgym/demo" in proc.stdout
        run = run_cli("run", "rgym/demo", "--runs-dir", str(runs_dir), "--quiet", python=env_python)
        assert run.returncode == 0, run.stdout + run.stderr
        # Restricting the plugins that load silences it.
        quiet = run_cli("--disable-plugin", "broken", "list", "tasks", python=env_python)
        assert "rgym-task-broken" not in quiet.stderr
        env_only = run_cli("list", "tasks", python=env_python, env={"RGYM_PLUGINS": "builtin"})
        assert "rgym-task-broken" not in env_only.stderr
    finally:
        pip(env_python, "uninstall", "--yes", "rgym-task-broken")


def test_example_pack_passes_check_pack() -> None:
    proc = run_cli("check-pack", str(REPO / "tests" / "example_pack"))
    assert proc.returncode == 0, proc.stdout
    assert "pack OK" in proc.stdout

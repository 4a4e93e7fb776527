"""Shared fixtures: run the CLI as a subprocess, as a user would; ``bwrap`` for the
tests that need bubblewrap (probed when the test runs, not when it is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120, python: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``rgym ARGS`` in a fresh interpreter and return the completed process."""
    full_env = {**os.environ, "PYTHONWARNINGS": "default", **(env or {})}
    return subprocess.run([python or sys.executable, "-m", "rgym_core.cli", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd or REPO, timeout=timeout)


def run_json(*args: str, **kwargs: Any) -> Any:
    proc = run_cli(*args, "--json", **kwargs)
    assert proc.stdout.strip(), f"no output; stderr:\n{proc.stderr}"
    return json.loads(proc.stdout)


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


def require_bwrap() -> str:
    """The bwrap binary rgym uses, or skip the calling test where bubblewrap cannot
    run here: a failure under ``CI=true`` (a missing install step), a ``not
    applicable`` skip where ``RGYM_BWRAP=0`` turned it off on purpose (the runs
    without bubblewrap)."""
    from rgym_core.isolation import bwrap_problem, find_bwrap
    from rgym_core.testing import skip_or_fail

    problem = bwrap_problem()
    if problem is None:
        path = find_bwrap()
        assert path is not None
        return path
    if problem.startswith("bubblewrap is disabled"):  # RGYM_BWRAP=0: the runs without it
        pytest.skip(f"not applicable: {problem}")
    skip_or_fail(f"bubblewrap is unusable here: {problem}")


@pytest.fixture
def bwrap() -> str:
    """The bwrap binary (see :func:`require_bwrap`)."""
    return require_bwrap()

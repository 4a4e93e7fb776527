"""Shared fixtures: run the CLI as a subprocess, as a user would."""

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

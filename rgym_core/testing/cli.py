"""Running the ``rgym`` command line from tests, as a user would: a subprocess.

::

    from rgym_core.testing import run_cli, run_json

    proc = run_cli("check-pack", str(PACK), "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = {row["name"] for row in run_json("list", "tasks")}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
            timeout: float = 300, python: str | Path | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``rgym ARGS`` in a fresh interpreter (``python``, default this one) and
    return the completed process (text output; never raises for a non-zero exit)."""
    full_env = {**os.environ, "PYTHONWARNINGS": "default", "COLUMNS": "200", **(env or {})}
    return subprocess.run([str(python or sys.executable), "-m", "rgym_core.cli", *args],
                          capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout,
                          input=input)


def run_json(*args: str, **kwargs: Any) -> Any:
    """``rgym ARGS --json`` parsed (raises ``AssertionError`` with stderr when there is no output)."""
    proc = run_cli(*args, "--json", **kwargs)
    if not proc.stdout.strip():
        raise AssertionError(f"rgym {' '.join(args)} --json printed nothing (exit {proc.returncode}); "
                             f"stderr:\n{proc.stderr}")
    return json.loads(proc.stdout)


__all__ = ["run_cli", "run_json"]

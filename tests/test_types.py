"""Types are checked: mypy is clean on rgym_core and every pack (the configuration,
files and exclusions are in the root pyproject.toml), and the core ships py.typed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_py_typed_is_shipped() -> None:
    assert (REPO / "rgym_core" / "py.typed").is_file()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["rgym_core"]


def test_mypy_is_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    by_file: dict[str, int] = {}
    for line in errors:
        by_file[line.split(":", 1)[0]] = by_file.get(line.split(":", 1)[0], 0) + 1
    summary = ", ".join(f"{path} ({n})" for path, n in sorted(by_file.items()))
    assert done.returncode == 0 and not errors, \
        f"mypy found {len(errors)} error(s) in: {summary}\n" + "\n".join(errors[:40]) + done.stderr[-2000:]

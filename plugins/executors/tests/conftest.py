"""Fixtures of the executor tests: a small sweep and its scores on the local executor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from executors_test_support import ENV, SWEEP, cell_scores

from rgym_core.testing import run_cli


@pytest.fixture(scope="session")
def local_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The sweep on the local executor: what every executor must reproduce."""
    folder = tmp_path_factory.mktemp("local") / "sweep"
    proc = run_cli(*SWEEP, "--sweep-dir", str(folder), "--quiet", env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr
    yield {"scores": cell_scores(folder), "summary": proc.stdout}

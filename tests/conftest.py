"""Shared fixtures: a runs folder; ``bwrap`` for the tests that need bubblewrap
(probed when the test runs, not when it is imported).  The CLI as a subprocess is
the test kit's :func:`rgym_core.testing.run_cli`."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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

"""What a test needs from the machine (an engine, a wheel, a data file): without it a
test is skipped on a developer's machine, and fails under ``CI=true``, where a skip
would hide a missing install step."""

from __future__ import annotations

import os
from typing import NoReturn


def in_ci() -> bool:
    """True when ``CI`` is ``true``, ``1`` or ``yes`` (any case)."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def skip_or_fail(reason: str, *, module: bool = False) -> NoReturn:
    """Skip the calling test (its module with ``module=True``) for ``reason``, or
    fail it with ``CI=true but <reason>`` in CI."""
    import pytest

    if in_ci():
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason, allow_module_level=module)

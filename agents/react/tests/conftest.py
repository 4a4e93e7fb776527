from __future__ import annotations

from collections.abc import Iterator

import pytest
from rgym_llm.testing import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv

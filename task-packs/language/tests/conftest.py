"""Shared fixtures of the language pack's tests.

``fixture_data`` writes, once per session, small files in the real formats for
every dataset of the pack (GPT-2 token shards, ``multinli_1.0.zip``, a small
random-init BERT saved with ``save_pretrained``) and registers their specs
(``language-fixture/...``, the fixture's checksums) through a throwaway plugin.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from language_testlib import FixtureData, require_gpt2_bpe  # noqa: E402


@pytest.fixture(scope="session")
def fixture_data(tmp_path_factory: pytest.TempPathFactory) -> FixtureData:
    require_gpt2_bpe()
    from rgym_task_language.fixtures import write_all

    root = tmp_path_factory.mktemp("language-fixtures")
    data, env = write_all(root)
    return FixtureData(root=root, data=data, env=env)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh rgym cache for this test (``RGYM_CACHE_DIR``)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RGYM_CACHE_DIR", str(cache))
    monkeypatch.delenv("RGYM_DATA_DIR", raising=False)
    yield cache

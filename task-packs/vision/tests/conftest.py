"""Shared fixtures of the vision pack's tests.

``fixture_data`` writes, once per session, small files in the real formats for
every dataset of the pack (IDX files, a CIFAR-10 python tarball, COCO captions
with images, a random-init ResNet-50 under torchvision's file name) and
registers their specs (``vision-fixture/...``, the fixture's checksums) through
a throwaway plugin, so ``rgym run --dataset data=vision-fixture/cifar10`` runs
the real loaders, starters and graders on them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vision_testlib import FixtureData  # noqa: E402


@pytest.fixture(scope="session")
def fixture_data(tmp_path_factory: pytest.TempPathFactory) -> FixtureData:
    from rgym_task_vision.fixtures import write_all

    root = tmp_path_factory.mktemp("vision-fixtures")
    data, env = write_all(root)
    return FixtureData(root=root, data=data, env=env)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh rgym cache for this test (``RGYM_CACHE_DIR``)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RGYM_CACHE_DIR", str(cache))
    monkeypatch.delenv("RGYM_DATA_DIR", raising=False)
    yield cache

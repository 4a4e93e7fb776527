"""Shared fixtures of the vision pack's tests.

``fixture_data`` writes, once per session, small files in the real formats for
every dataset of the pack (IDX files, a CIFAR-10 python tarball, COCO captions
with images, a random-init ResNet-50 under torchvision's file name) and
registers their specs (``vision-fixture/...``, the fixture's checksums) through
a throwaway plugin, so ``rgym run --dataset data=vision-fixture/cifar10`` runs
the real loaders, starters and graders on them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_vision" / "tasks"
DATASETS = PACK / "rgym_task_vision" / "datasets"
FASHION_SYSTEM = Path("/usr/share/datasets/fashion-mnist")

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


@attrs.define(frozen=True)
class FixtureData:
    root: Path
    data: Path          # --data-dir: one sub-folder per dataset
    env: dict[str, str]  # PYTHONPATH with the fixture plugin

    def copy_of(self, dataset_folder: str, dest: Path) -> Path:
        """A writable copy of one dataset folder, inside a new data folder ``dest``."""
        shutil.copytree(self.data / dataset_folder, dest / dataset_folder)
        return dest


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


def load_spec(name: str):  # type: ignore[no-untyped-def]
    from rgym_core.packs import load_dataset

    return load_dataset(DATASETS / f"{name}.yaml")


def subprocess_env(*extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RGYM_DATA_DIR",)}
    for part in extra:
        env.update(part)
    return env

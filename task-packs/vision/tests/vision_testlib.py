"""Helpers shared by the vision pack's tests (a uniquely named module: every pack's
tests share one pytest session, so `conftest` is not importable by name)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_vision" / "tasks"
DATASETS = PACK / "rgym_task_vision" / "datasets"
FASHION_SYSTEM = Path("/usr/share/datasets/fashion-mnist")


@attrs.define(frozen=True)
class FixtureData:
    root: Path
    data: Path          # --data-dir: one sub-folder per dataset
    env: dict[str, str]  # PYTHONPATH with the fixture plugin

    def copy_of(self, dataset_folder: str, dest: Path) -> Path:
        """A writable copy of one dataset folder, inside a new data folder ``dest``."""
        shutil.copytree(self.data / dataset_folder, dest / dataset_folder)
        return dest


def load_spec(name: str):  # type: ignore[no-untyped-def]
    from rgym_core.packs import load_dataset

    return load_dataset(DATASETS / f"{name}.yaml")


def subprocess_env(*extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RGYM_DATA_DIR",)}
    for part in extra:
        env.update(part)
    return env

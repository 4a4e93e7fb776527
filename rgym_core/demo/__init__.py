"""The built-in demo task ``rgym/demo``: a one-minute regression that runs on a
fresh machine with no API key and no Docker."""

from __future__ import annotations

from pathlib import Path

from rgym_core.packs import load_dataset, load_tasks
from rgym_core.specs import DatasetSpec, TaskSpec

HERE = Path(__file__).parent


def demo_tasks() -> list[TaskSpec]:
    return load_tasks(HERE / "tasks")


def demo_datasets() -> list[DatasetSpec]:
    return [load_dataset(HERE / "datasets" / "points.yaml")]

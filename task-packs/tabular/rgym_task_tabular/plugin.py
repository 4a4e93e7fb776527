"""The rgym plugin of the tabular pack: ``mlgym/house-price`` and ``mlgym/titanic``."""

from __future__ import annotations

from pathlib import Path

from rgym_core import DatasetSpec, TaskSpec, hookimpl, load_dataset, load_tasks

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    return load_tasks(HERE / "tasks")


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

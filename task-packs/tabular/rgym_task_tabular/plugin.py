"""The rgym plugin of the tabular pack: ``mlgym/house-price`` and ``mlgym/titanic``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import DatasetSpec, TaskSpec

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    from rgym_core import load_tasks

    return load_tasks(HERE / "tasks")


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    from rgym_core import load_dataset

    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

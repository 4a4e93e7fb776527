"""The rgym plugin of the vision pack: three tasks and five datasets.

Registration reads YAML only: numpy, PIL and torch are imported when a dataset
is prepared or a starter runs, never at ``rgym --help`` / ``rgym list`` time.
"""

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

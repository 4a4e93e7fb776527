"""The rgym plugin of the cross-modal-retrieval pack.  Imports nothing heavy:
numpy is imported when data are prepared or graded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rgym_researchgym.pack import researchgym_task

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import DatasetSpec, TaskSpec

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    return [researchgym_task(HERE / "tasks" / "cross-modal-retrieval", "cross-modal-retrieval")]


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    from rgym_core import load_dataset

    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

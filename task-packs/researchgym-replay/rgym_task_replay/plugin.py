"""The rgym plugin of the improving-replay-buffers pack.  Imports nothing heavy: numpy and
torch are imported when data are prepared or graded."""

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
    return [researchgym_task(HERE / "tasks" / "improving-replay-buffers", "improving-replay-buffers")]


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    from rgym_core import load_dataset

    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

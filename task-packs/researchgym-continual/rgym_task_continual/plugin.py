"""The rgym plugin of the continual-learning pack.  Imports nothing heavy: numpy and
torch are imported when data are prepared or graded."""

from __future__ import annotations

from pathlib import Path

from rgym_researchgym.pack import researchgym_task

from rgym_core import DatasetSpec, TaskSpec, hookimpl, load_dataset
from rgym_task_continual.profile_subtasks import with_profile_subtasks

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    folder = HERE / "tasks" / "continual-learning"
    return [with_profile_subtasks(researchgym_task(folder, "continual-learning"), folder)]


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

"""The rgym plugin of the improving-replay-buffers pack.  Imports nothing heavy: numpy and
torch are imported when data are prepared or graded."""

from __future__ import annotations

from pathlib import Path

from rgym_researchgym.pack import researchgym_task

from rgym_core import DatasetSpec, TaskSpec, hookimpl, load_dataset
from rgym_task_replay.profile_subtasks import with_profile_subtasks

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    folder = HERE / "tasks" / "improving-replay-buffers"
    return [with_profile_subtasks(researchgym_task(folder, "improving-replay-buffers"), folder)]


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    return [load_dataset(p) for p in sorted((HERE / "datasets").glob("*.yaml"))]

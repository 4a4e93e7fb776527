"""The pack's rgym plugin: registers its three tasks (imports no JAX)."""

from __future__ import annotations

from rgym_core import TaskSpec, hookimpl, load_tasks, package_path


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    return load_tasks(package_path("rgym_task_rl", "tasks"))

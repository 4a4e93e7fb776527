"""The pack's rgym plugin: registers its three tasks (imports no JAX)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import TaskSpec


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    from rgym_core import load_tasks, package_path

    return load_tasks(package_path("rgym_task_rl", "tasks"))

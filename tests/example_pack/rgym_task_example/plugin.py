"""Registers the pack's tasks with rgym."""

from rgym_core import hookimpl, load_tasks, package_path


@hookimpl
def rgym_register_tasks():
    return load_tasks(package_path("rgym_task_example", "tasks"))

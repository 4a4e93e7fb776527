"""In-process stand-ins for tests that call :func:`rgym_core.runner.run_episode`
directly: an agent that plays a fixed script, and a plugin that registers the specs a
test built (``load_registry(extra_plugins=[("name", SpecsPlugin(tasks=[task]))])``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rgym_core.hookspecs import hookimpl
from rgym_core.records import Action
from rgym_core.specs import DatasetSpec, TaskSpec


class ScriptAgent:
    """Plays ``actions`` in order, then submits (``ScriptAgent()`` submits at once)."""

    def __init__(self, *actions: Action) -> None:
        self.actions = list(actions)
        self.observations: list[Any] = []

    def start(self, context: Any) -> None:
        pass

    def act(self, observation: Any) -> Action:
        self.observations.append(observation)
        return self.actions.pop(0) if self.actions else Action(tool="submit")


class SpecsPlugin:
    """A plugin object registering ``tasks`` and ``datasets`` (``None`` entries are
    skipped, so a test can register a task without its dataset)."""

    def __init__(self, *, tasks: Iterable[TaskSpec | None] = (),
                 datasets: Iterable[DatasetSpec | None] = ()) -> None:
        self.tasks = [t for t in tasks if t is not None]
        self.datasets = [d for d in datasets if d is not None]

    @hookimpl
    def rgym_register_tasks(self) -> list[TaskSpec]:
        return list(self.tasks)

    @hookimpl
    def rgym_register_datasets(self) -> list[DatasetSpec]:
        return list(self.datasets)

"""Sub-tasks per profile (a stop-gap until the core's ``TaskProfile`` can carry them).

ResearchGym's sub-tasks are real-data evaluations (the ``researchgym`` profile); the
``cpu`` profile grades one sub-task of its own on generated data.  ``rgym_core``'s
profiles cannot replace ``subtasks`` yet, so this pack registers its task as a
:class:`ProfiledTaskSpec`, whose :meth:`~ProfiledTaskSpec.with_profile` also swaps in
the profile's sub-tasks listed in ``subtasks.yaml`` beside ``task.yaml``
(``{profile: [sub-task, ...]}``, each entry as in ``task.yaml``'s ``subtasks``).
Results then record the sub-tasks the run's profile actually grades, which is what
``rgym score``'s completion rates and normalised scores are computed against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.specs import SubTask, TaskSpec

FILE = "subtasks.yaml"


@define(frozen=True)
class ProfiledTaskSpec(TaskSpec):
    """A :class:`TaskSpec` whose profiles may replace its sub-tasks."""

    profile_subtasks: dict[str, list[SubTask]] = field(factory=dict)

    def with_profile(self, name: str | None = None) -> TaskSpec:
        spec = super().with_profile(name)
        subtasks = self.profile_subtasks.get(spec.profile or "")
        if subtasks is None or list(spec.subtasks) == subtasks:
            return spec
        return attrs.evolve(spec, subtasks=list(subtasks))


def with_profile_subtasks(spec: TaskSpec, folder: Path) -> TaskSpec:
    """``spec`` as a :class:`ProfiledTaskSpec` with ``folder/subtasks.yaml``'s sub-tasks;
    an unknown profile name or a malformed entry is an error naming the file."""
    from rgym_core.serialization import read_data_file, structure

    path = folder / FILE
    if not path.is_file():
        return spec
    data: Any = read_data_file(path) or {}
    unknown = sorted(set(data) - set(spec.profiles))
    if unknown:
        raise ValueError(f"{path}: unknown profile(s) {', '.join(unknown)}; the task's profiles are "
                         f"{', '.join(spec.profiles)}")
    table = {name: [structure(entry, SubTask, f"{path}: {name}[{i}]") for i, entry in enumerate(entries)]
             for name, entries in data.items()}
    values = {a.name: getattr(spec, a.name) for a in attrs.fields(TaskSpec) if a.init}
    return ProfiledTaskSpec(**values, profile_subtasks=table)

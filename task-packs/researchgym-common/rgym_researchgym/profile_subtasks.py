"""Sub-tasks per profile, for every ResearchGym pack (until ``TaskProfile`` carries them).

ResearchGym's sub-tasks are real-data evaluations (the ``researchgym`` profile); a
``cpu`` profile grades its own small sub-tasks.  Results and ``rgym score``
(completion and improvement rates, normalised scores) must count the sub-tasks the
run's profile grades, with that profile's baselines.  A pack lists them in
``subtasks.yaml`` beside ``task.yaml``::

    cpu:
      - {id: ner-sofc, primary: true, metric: sofc_ner_macro_f1, baseline_scores: {...}}

:func:`with_profile_subtasks` turns the task into a :class:`ProfiledTaskSpec`, whose
:meth:`~ProfiledTaskSpec.with_profile` swaps in the profile's list (profiles not named
keep ``task.yaml``'s).  :func:`rgym_researchgym.pack.researchgym_task` applies it when
the file exists.  The same design as RGB's stop-gap in the continual-learning pack.
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
    """``spec`` with ``folder/subtasks.yaml``'s per-profile sub-tasks (unchanged without
    the file); an unknown profile, metric or malformed entry is an error naming the file."""
    from rgym_core.serialization import read_data_file, structure

    path = folder / FILE
    if not path.is_file():
        return spec
    data: Any = read_data_file(path) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of profile name -> list of sub-tasks")
    unknown = sorted(set(data) - set(spec.profiles))
    if unknown:
        raise ValueError(f"{path}: unknown profile(s) {', '.join(unknown)}; the task's profiles are "
                         f"{', '.join(spec.profiles)}")
    metrics = {m.name for m in spec.metrics}
    table: dict[str, list[SubTask]] = {}
    for name, entries in data.items():
        subtasks = [structure(entry, SubTask, f"{path}: {name}[{i}]") for i, entry in enumerate(entries or [])]
        for sub in subtasks:
            named = {sub.metric} | set(sub.baseline_scores) | set(sub.reference_scores)
            bad = sorted(m for m in named if m is not None and m not in metrics)
            if bad:
                raise ValueError(f"{path}: {name}: sub-task '{sub.id}' names unknown metric(s) "
                                 f"{', '.join(bad)}")
        if sum(s.primary for s in subtasks) > 1:
            raise ValueError(f"{path}: {name}: more than one primary sub-task")
        table[name] = subtasks
    values = {a.name: getattr(spec, a.name) for a in attrs.fields(TaskSpec) if a.init}
    return ProfiledTaskSpec(**values, profile_subtasks=table)

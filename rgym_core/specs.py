"""Declarative specs: tasks, datasets, metrics, baselines, resources and budgets.

All specs are frozen attrs classes.  They are read from YAML or JSON with
:func:`rgym_core.serialization.load_spec`, which reports a bad file as one line
``path: field.path: what is wrong``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import attrs
from attrs import define, field

Direction = Literal["maximize", "minimize"]
GraderLocation = Literal["host", "sandbox"]


def _positive(instance: Any, attribute: attrs.Attribute, value: float | int | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"'{attribute.name}' must be positive, got {value!r}")


def _namespaced(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    parts = value.split("/")
    if len(parts) != 2 or not all(parts) or any(c.isspace() for c in value):
        raise ValueError(
            f"'{attribute.name}' must be namespaced as 'pack/name' without spaces, got {value!r}"
        )


@define(frozen=True)
class Metric:
    """A metric the grader reports. Exactly one metric of a task is primary."""

    name: str
    direction: Direction = "maximize"
    primary: bool = False
    description: str = ""

    def better(self, a: float, b: float) -> bool:
        """True when ``a`` is strictly better than ``b``."""
        return a > b if self.direction == "maximize" else a < b


@define(frozen=True)
class Baseline:
    """How to run the starter solution, and the scores it gets."""

    command: str | None = None
    scores: dict[str, float] = field(factory=dict)
    description: str = ""


@define(frozen=True)
class SubTask:
    """A part of a research task, scored on its own (ResearchGym's sub-tasks)."""

    id: str
    description: str = ""
    metric: str | None = None
    baseline_scores: dict[str, float] = field(factory=dict)
    reference_scores: dict[str, float] = field(factory=dict)
    weight: float = field(default=1.0, validator=_positive)
    primary: bool = False


@define(frozen=True)
class Resources:
    """What a task needs, and the limits its sandbox gets."""

    memory_mb: int | None = field(default=None, validator=_positive)
    cpus: float | None = field(default=None, validator=_positive)
    pids: int | None = field(default=None, validator=_positive)
    gpus: int = 0
    network: bool = False
    image: str | None = None
    requirements: list[str] = field(factory=list)


@define(frozen=True)
class Budget:
    """Limits of one episode. ``None`` means unlimited."""

    max_steps: int | None = field(default=50, validator=_positive)
    time_limit_s: float | None = field(default=3600.0, validator=_positive)
    action_timeout_s: float = field(default=600.0, validator=_positive)
    cost_limit_usd: float | None = field(default=None, validator=_positive)
    token_limit: int | None = field(default=None, validator=_positive)

    def merged(self, **overrides: Any) -> Budget:
        """A copy with every override that is not ``None`` applied."""
        return attrs.evolve(self, **{k: v for k, v in overrides.items() if v is not None})


@define(frozen=True)
class GraderSpec:
    """Where the grader lives and how it runs.

    ``files`` is a folder of the task directory that only the grader sees;
    ``entry`` a Python script inside it.  The runner lays out a fresh evaluation
    folder for every grading (``submission/``, ``grader/``, ``data/<mount>`` and
    ``private/<mount>``), runs ``python grader/<entry>`` there with
    ``RGYM_SCORES_FILE`` pointing at the JSON file the grader must write, and
    never executes a file the agent could edit.  ``include`` maps extra files or
    folders of the pack (paths relative to the task folder, e.g.
    ``../_shared/arena.py``) to names inside ``grader/``, so tasks of one pack share
    grader code without copies.  ``location`` chooses the host or
    a separate short-lived sandbox (for backends that support it).
    """

    entry: str = "evaluate.py"
    files: str = "grader"
    include: dict[str, str] = field(factory=dict)
    location: GraderLocation = "host"
    timeout_s: float = field(default=600.0, validator=_positive)
    submission: list[str] = field(factory=lambda: ["**/*"])
    exclude: list[str] = field(factory=lambda: ["data/**"])


@define(frozen=True)
class DatasetMount:
    """A dataset a task uses, and the folder of the workspace it appears in."""

    id: str = field(validator=_namespaced)
    mount: str = "data"


@define(frozen=True)
class TaskSpec:
    """Everything rgym needs to know to run and grade one task."""

    id: str = field(validator=_namespaced)
    description: str
    metrics: list[Metric] = field()
    name: str = ""
    starter_files: str | None = "starter"
    grader: GraderSpec = field(factory=GraderSpec)
    datasets: list[DatasetMount] = field(factory=list)
    baseline: Baseline | None = None
    reference_scores: dict[str, float] = field(factory=dict)
    subtasks: list[SubTask] = field(factory=list)
    resources: Resources = field(factory=Resources)
    budget: Budget = field(factory=Budget)
    tools: list[str] = field(factory=list)
    tool_config: dict[str, dict[str, Any]] = field(factory=dict)
    scripted_actions: list[dict[str, Any]] = field(factory=list)
    tags: list[str] = field(factory=list)
    version: str = "1"
    root: Path | None = field(default=None, eq=False)

    @metrics.validator
    def _check_metrics(self, attribute: attrs.Attribute, value: list[Metric]) -> None:
        if not value:
            raise ValueError("'metrics' must list at least one metric")
        primaries = [m.name for m in value if m.primary]
        if len(value) > 1 and len(primaries) != 1:
            raise ValueError(
                f"'metrics' must have exactly one entry with 'primary: true', found {len(primaries)} "
                f"({', '.join(primaries) or 'none'})"
            )
        names = [m.name for m in value]
        if len(set(names)) != len(names):
            raise ValueError(f"'metrics' must have unique names, got {names}")

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def primary_metric(self) -> Metric:
        """The primary metric (the only metric when there is just one)."""
        for m in self.metrics:
            if m.primary:
                return m
        return self.metrics[0]

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    @property
    def baseline_scores(self) -> dict[str, float]:
        return dict(self.baseline.scores) if self.baseline else {}

    def path(self, relative: str | None) -> Path | None:
        """A path inside the task's directory, or ``None``."""
        if relative is None or self.root is None:
            return None
        return self.root / relative


@define(frozen=True)
class DatasetSpec:
    """A dataset: where it comes from, how to check it, and what form it has.

    ``path`` (a local folder, relative to the spec file), ``url`` (an archive or
    file, fetched once into the cache) or ``hub_id`` (resolved by ``prepare``)
    say where it comes from; ``checksums`` maps file names to SHA-256 digests.
    ``prepare`` is an optional ``module:function`` that turns the raw files into
    a :class:`PreparedDataset` (for example a reproducible split whose test
    labels go to the grader only).  Datasets are always read-only to the agent.
    """

    id: str = field(validator=_namespaced)
    description: str = ""
    form: str = ""
    path: str | None = None
    url: str | None = None
    hub_id: str | None = None
    checksums: dict[str, str] = field(factory=dict)
    prepare: str | None = None
    options: dict[str, Any] = field(factory=dict)
    root: Path | None = field(default=None, eq=False)

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0]


@define(frozen=True)
class PreparedDataset:
    """A dataset ready on the host: ``public`` is shown to the agent read-only;
    ``private`` (test labels and the like) reaches only the grader."""

    id: str
    public: Path
    private: Path | None = None


def is_better(value: float, other: float | None, direction: Direction) -> bool:
    """True when ``value`` beats ``other`` (``None`` and NaN always lose)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if other is None or (isinstance(other, float) and math.isnan(other)):
        return True
    return value > other if direction == "maximize" else value < other

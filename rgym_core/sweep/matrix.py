"""What a sweep runs: the matrix (tasks x agents x models x seeds x repeats,
with profiles) and the cells it expands to.

A :class:`SweepSpec` holds the axes as the user wrote them (task names or globs
such as ``mlgym/*``) and the ``rgym run`` options every episode shares.
:func:`expand` resolves it against the registry into :class:`Cell` objects, one
per episode, each named deterministically (:attr:`Cell.key`), so re-running the
same sweep finds the same run directories.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.rundir import solver_folder

#: ``RunConfig`` fields that are axes of the matrix or set per cell, never shared options.
CELL_FIELDS = ("task", "agent", "model", "seed", "profile", "run_dir", "runs_dir")
#: Shared options that do not change what an episode does (left out of the fingerprint).
NEUTRAL_FIELDS = ("data_dir", "probe_models", "tags")


class SweepError(ValueError):
    """The sweep cannot be built as given; the message names the field and the fix."""


def parse_seeds(value: str | int | Sequence[Any] | None, *, where: str = "--seeds") -> list[int]:
    """``"1-3,7"`` -> ``[1, 2, 3, 7]`` (ranges inclusive; a list of ints or range texts too)."""
    if value is None:
        return []
    items: list[Any]
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        items = [v for v in re.split(r"[,\s]+", value.strip()) if v]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise SweepError(f"{where}: expected seeds such as 1-3,7, got {value!r}")
    seeds: list[int] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            seeds.append(item)
            continue
        text = str(item).strip()
        match = re.fullmatch(r"(-?\d+)(?:-(-?\d+))?", text)
        if not match:
            raise SweepError(f"{where}: {text!r} is not a seed or a range (write 1-3,7)")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise SweepError(f"{where}: the range {text!r} is empty (write the smaller seed first)")
        if hi - lo >= 100_000:
            raise SweepError(f"{where}: the range {text!r} holds over 100000 seeds")
        seeds.extend(range(lo, hi + 1))
    duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
    if duplicates:
        raise SweepError(f"{where}: seed(s) {', '.join(map(str, duplicates))} given twice")
    return seeds


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, Iterable):
        out: list[str] = []
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise SweepError(f"{where}: expected names, got {item!r}")
            out.extend(v.strip() for v in item.split(",") if v.strip())
        return out
    raise SweepError(f"{where}: expected a name or a list of names, got {value!r}")


@define(frozen=True)
class Cell:
    """One episode of the sweep: a point of the matrix."""

    task: str
    agent: str
    model: str | None = None
    seed: int | None = None
    repeat: int = 1
    profile: str | None = None

    @property
    def key(self) -> str:
        """The run directory's path inside the sweep folder, e.g.
        ``mlgym__blotto/baseline/seed-1`` or ``rgym__demo@cpu/react__mock_submit/run-2``."""
        task = self.task.replace("/", "__") + (f"@{_slug(self.profile)}" if self.profile else "")
        if self.seed is None:
            leaf = f"run-{self.repeat}"
        else:
            leaf = f"seed-{self.seed}" + (f"_r{self.repeat}" if self.repeat > 1 else "")
        return f"{task}/{solver_folder(self.agent, self.model)}/{leaf}"

    @property
    def label(self) -> str:
        """One line for people: ``mlgym/blotto baseline seed=1``."""
        parts = [self.task + (f"@{self.profile}" if self.profile else ""),
                 self.agent.split("/", 1)[-1] + (f" ({self.model})" if self.model else "")]
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        if self.repeat > 1 or self.seed is None:
            parts.append(f"#{self.repeat}")
        return " ".join(parts)

    @property
    def task_label(self) -> str:
        return self.task + (f"@{self.profile}" if self.profile else "")

    def to_data(self) -> dict[str, Any]:
        return {"dir": self.key, **attrs.asdict(self)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Cell:
        return cls(task=str(data["task"]), agent=str(data["agent"]), model=data.get("model"),
                   seed=data.get("seed"), repeat=int(data.get("repeat", 1)),
                   profile=data.get("profile"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


@define
class SweepSpec:
    """The matrix as the user gave it, plus the ``rgym run`` options every episode shares
    (``run``: :class:`~rgym_core.runner.RunConfig` field names and values)."""

    tasks: list[str] = field(factory=list)
    agents: list[str] = field(factory=lambda: ["scripted"])
    models: list[str] = field(factory=list)
    seeds: list[int] = field(factory=list)
    repeats: int = 1
    profiles: list[str] = field(factory=list)
    exclude: list[str] = field(factory=list)
    run: dict[str, Any] = field(factory=dict)
    name: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "tasks": list(self.tasks), "exclude": list(self.exclude),
                "agents": list(self.agents), "models": list(self.models), "seeds": list(self.seeds),
                "repeats": self.repeats, "profiles": list(self.profiles),
                "run": _plain(self.run)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, where: str = "sweep") -> SweepSpec:
        """Build from a mapping (a YAML file or a manifest); unknown keys are errors."""
        known = {"name", "tasks", "exclude", "agents", "models", "seeds", "repeats", "profiles",
                 "run", "options"}
        unknown = sorted(set(data) - known - set(SWEEP_SETTINGS))
        if unknown:
            raise SweepError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known | set(SWEEP_SETTINGS)))}")
        run = dict(data.get("run") or data.get("options") or {})
        check_run_options(run, where=f"{where}: run")
        repeats = data.get("repeats", 1)
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise SweepError(f"{where}: repeats: expected a whole number >= 1, got {repeats!r}")
        return cls(tasks=_strings(data.get("tasks"), f"{where}: tasks"),
                   agents=_strings(data.get("agents"), f"{where}: agents") or ["scripted"],
                   models=_strings(data.get("models"), f"{where}: models"),
                   seeds=parse_seeds(data.get("seeds"), where=f"{where}: seeds"),
                   repeats=repeats,
                   profiles=_strings(data.get("profiles"), f"{where}: profiles"),
                   exclude=_strings(data.get("exclude"), f"{where}: exclude"),
                   run=run, name=data.get("name"))

    def effective_run(self) -> dict[str, Any]:
        """The shared options that change what an episode does: without the neutral
        ones and without those set to ``rgym run``'s own defaults (``--sandbox local``
        given or not is the same sweep)."""
        defaults = run_option_defaults()
        return {k: v for k, v in _plain(self.run).items()
                if k not in NEUTRAL_FIELDS and (k not in defaults or _plain(defaults[k]) != v)}

    def fingerprint(self) -> str:
        """A short hash of what the episodes do (shared options, not the axes): two
        sweeps into one folder must agree on it."""
        return _hash(self.effective_run())

    def identity(self) -> str:
        """A short hash of the whole matrix and options: the default folder name."""
        data = self.to_data()
        data["run"] = self.effective_run()
        return _hash(data)


#: Settings of the sweep itself that a YAML file may hold (the command line wins).
SWEEP_SETTINGS = ("max_parallel", "max_connections", "retry_errors", "executor", "executor_options",
                  "sweep_dir")


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(data), sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_option_names() -> dict[str, Any]:
    """The ``RunConfig`` fields a sweep shares between its episodes."""
    from rgym_core.runner import RunConfig

    return {a.name: a for a in attrs.fields(RunConfig) if a.name not in CELL_FIELDS}


def run_option_defaults() -> dict[str, Any]:
    """``RunConfig``'s default of each shared option."""
    out: dict[str, Any] = {}
    for name, attribute in run_option_names().items():
        default = attribute.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        out[name] = default
    return out


def check_run_options(run: Mapping[str, Any], *, where: str) -> None:
    names = run_option_names()
    unknown = sorted(set(run) - set(names))
    if unknown:
        raise SweepError(f"{where}: unknown option(s) {', '.join(unknown)}; the options are the "
                         f"rgym run options: {', '.join(sorted(names))}")


def resolve_tasks(registry: Any, patterns: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    """Full task ids for names and globs (``mlgym/*``, ``*/titanic``), in sorted order
    per pattern; a pattern that matches nothing is an error naming it."""
    from rgym_core.registry import RegistryError

    names = sorted(registry.tasks)
    chosen: list[str] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)
                       or fnmatch.fnmatchcase(n.split("/", 1)[-1], pattern)]
            if not matched:
                raise SweepError(f"task pattern '{pattern}' matches no installed task "
                                 f"(`rgym list tasks` lists them)")
        else:
            try:
                matched = [registry.resolve("tasks", pattern).name]
            except RegistryError as exc:
                raise SweepError(str(exc)) from None
        chosen.extend(n for n in matched if n not in chosen)
    dropped = [n for n in chosen if any(fnmatch.fnmatchcase(n, x) or n.split("/", 1)[-1] == x or n == x
                                        for x in exclude)]
    out = [n for n in chosen if n not in dropped]
    if not out:
        raise SweepError("no task left to run (every task matched --exclude)" if chosen
                         else "no task given: name tasks or globs (e.g. 'mlgym/*')")
    return out


def expand(spec: SweepSpec, registry: Any) -> list[Cell]:
    """The cells of ``spec``: tasks (with profiles) x agents x models x seeds x repeats.

    An agent that takes no model runs once per task and seed whatever ``models``
    holds; a task without profiles ignores the profile axis; a profile a task
    lacks is an error naming the task's profiles."""
    from rgym_core.registry import RegistryError

    if not spec.tasks:
        raise SweepError("no task given: name tasks or globs (e.g. 'mlgym/*'), or --file SWEEP.yaml")
    tasks = resolve_tasks(registry, spec.tasks, spec.exclude)
    agents = []
    for name in spec.agents:
        try:
            reg = registry.resolve("agents", name)
        except RegistryError as exc:
            raise SweepError(str(exc)) from None
        agents.append((reg.name, reg.item))
    task_profiles: list[tuple[str, str | None]] = []
    for task_id in tasks:
        task = registry.task(task_id)
        if not spec.profiles or not task.profiles:
            wanted: list[str | None] = [None] if not task.profiles else [task.default_profile_name]
        else:
            missing = [p for p in spec.profiles if p not in task.profiles]
            if missing:
                raise SweepError(f"task '{task_id}' has no profile {', '.join(missing)}; its profiles: "
                                 f"{', '.join(task.profile_names)} (exclude it with --exclude {task_id})")
            wanted = list(spec.profiles)
        task_profiles.extend((task_id, p) for p in wanted)
    seeds: list[int | None] = list(spec.seeds) or [None]
    cells: list[Cell] = []
    for task_id, profile in task_profiles:
        for agent_name, agent_spec in agents:
            models: list[str | None] = (list(spec.models) or [None]) if agent_spec.accepts_model else [None]
            for model in models:
                for seed in seeds:
                    for repeat in range(1, spec.repeats + 1):
                        cell = Cell(task=task_id, agent=agent_name, model=model, seed=seed,
                                    repeat=repeat, profile=profile)
                        if cell not in cells:
                            cells.append(cell)
    keys: dict[str, Cell] = {}
    for cell in cells:
        if cell.key in keys:  # two names that slug alike (model names differing only in punctuation)
            raise SweepError(f"cells {keys[cell.key].label!r} and {cell.label!r} would share the folder "
                             f"{cell.key}; rename one")
        keys[cell.key] = cell
    return cells


def cell_config(cell: Cell, spec: SweepSpec, run_dir: Path) -> Any:
    """The :class:`~rgym_core.runner.RunConfig` of one cell's episode, written into ``run_dir``.

    Unless ``grader_seed`` is set for the whole sweep, a seeded cell's grader gets the
    cell's seed too, so a re-run of the cell is graded alike."""
    from rgym_core.runner import RunConfig

    values = dict(spec.run)
    if values.get("grader_seed") is None and cell.seed is not None:
        values["grader_seed"] = cell.seed
    if "data_dir" in values and values["data_dir"] is not None:
        values["data_dir"] = Path(values["data_dir"])
    tags = dict(values.pop("tags", None) or {})
    tags.setdefault("sweep_cell", cell.key)
    return RunConfig(task=cell.task, agent=cell.agent, model=cell.model, seed=cell.seed,
                     profile=cell.profile, run_dir=run_dir, tags=tags, **values)


__all__ = ["CELL_FIELDS", "Cell", "SWEEP_SETTINGS", "SweepError", "SweepSpec", "cell_config",
           "check_run_options", "expand", "parse_seeds", "resolve_tasks", "run_option_names"]

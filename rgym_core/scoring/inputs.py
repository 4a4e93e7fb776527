"""Loaders for everything ``rgym score`` reads.

* run directories written by the runner (a run directory, a runs folder or a
  sweep folder: :func:`rgym_core.rundir.iter_run_dirs`).  A ``result.json`` that
  cannot be read is skipped with a warning naming it (an error with
  ``strict``); a run without one is listed as running or incomplete, by name.
  When runs of one task used different profiles, each (task, profile) is a task
  of its own, named ``task@profile``;
* long-format CSV or JSON Lines: ``solver, task, run, metric, value`` plus the
  optional ``direction``, ``subtask``, ``primary`` and ``tolerance`` columns;
  rows of the solvers ``baseline`` and ``reference`` give those scores (and the
  baseline's rows its tolerance).  The file is streamed into per-episode
  aggregates, so memory follows the episodes, not the rows;
* MLGym's wide tables: ``Task,<solver>,...``, one row per task, an empty cell
  meaning no valid run.

Reserved solver names.  ``baseline`` (or the name ``--baseline-column`` gives)
and ``reference`` stand for the task's own baseline and reference scores, as in
MLGym's tables: in long-format input and wide tables a solver so named *is*
that score, never a solver with runs.  In run directories a solver comes from
the runs (the agent's short name, or ``--solver-key``), so one named like that
(e.g. ``--agent baseline``) is renamed ``<name>-agent`` (``<name>-model``,
``<name>-tag`` for those keys; ``-2``, ``-3`` ... added if that is taken too) and
keeps its k runs; the rename is reported as a note.  In long-format input, a
reserved solver with several differing runs on a task is reported as a note too
(the last value is used); call an agent's runs ``baseline-agent`` there.

Every loader raises :class:`InputError`, one line naming the file, the row and
the column.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
from attrs import define, field

from rgym_core.direction import DIRECTIONS, parse_direction
from rgym_core.records import EpisodeResult
from rgym_core.runcheck import result_problem
from rgym_core.rundir import RunDir, RunDirError, RunState, iter_run_dirs
from rgym_core.scoring.episodes import Episode, SubtaskInfo, TaskInfo
from rgym_core.specs import Baseline, Direction

T = TypeVar("T")

LONG_COLUMNS = ("solver", "task", "run", "metric", "value")
#: The default names of the solvers that stand for a task's own scores.
BASELINE, REFERENCE = "baseline", "reference"

__all__ = ["BASELINE", "BASELINE_SETS", "DIRECTIONS", "PUBLISHED_BY_DEFAULT", "choose_baseline", "LONG_COLUMNS", "REFERENCE", "DirectionLookup", "FlaggedRun",
           "InputError", "PendingRun", "ScoreData", "integrity_summary", "WideTables", "find_results", "load_long", "load_runs",
           "load_wide", "read_wide", "registry_directions", "solver_name"]


class InputError(ValueError):
    """Malformed scoring input; ``str(err)`` names the file, row and column."""


@define(frozen=True)
class PendingRun:
    """A run directory without a usable result: ``running``, ``incomplete``
    (killed: ``rgym grade PATH`` finishes it) or ``corrupt``."""

    path: str
    state: str
    task: str | None = None
    solver: str | None = None
    steps: int = 0
    problem: str | None = None


@define(frozen=True)
class FlaggedRun:
    """A run the integrity monitor flagged (``result.json``'s ``extras["integrity"]``
    has ``flagged: true``: at least one finding of severity error).  ``kinds`` are
    the findings' kinds, ``findings`` their first messages; ``excluded`` says whether
    ``--exclude-flagged`` left it out."""

    path: str
    task: str
    solver: str
    run: str
    kinds: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()
    excluded: bool = False


def integrity_summary(result: EpisodeResult) -> dict[str, Any] | None:
    """The integrity monitor's summary in a result (``None``: the run was not checked)."""
    value = (result.extras or {}).get("integrity")
    return value if isinstance(value, dict) else None


@define
class ScoreData:
    """Episodes and what is known about their tasks, from any input.

    ``pending`` lists run directories without a usable result; ``warnings`` what
    was skipped (each naming its file)."""

    tasks: dict[str, TaskInfo] = field(factory=dict)
    episodes: list[Episode] = field(factory=list)
    notes: list[str] = field(factory=list)
    pending: list[PendingRun] = field(factory=list)
    warnings: list[str] = field(factory=list)
    #: Runs the integrity monitor flagged (left out when ``exclude_flagged``).
    flagged: list[FlaggedRun] = field(factory=list)
    #: Whether flagged runs were left out.
    exclude_flagged: bool = False
    #: Which baseline figures runs were scored against (:data:`BASELINE_SETS`).
    baselines: str = "auto"


#: Looks up the direction of a task by name (``None`` when unknown).
DirectionLookup = Callable[[str], "Direction | None"]


def registry_directions() -> DirectionLookup:
    """A lookup of registered tasks' primary-metric directions.  The registry is
    loaded on the first call only, and its absence (or failure) means "unknown"."""
    cache: dict[str, Any] = {}

    def lookup(task: str) -> Direction | None:
        if "registry" not in cache:
            try:
                from rgym_core.registry import load_registry

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cache["registry"] = load_registry()
            except Exception:  # noqa: BLE001 - scoring works without any plugin
                cache["registry"] = None
        registry = cache["registry"]
        if registry is None:
            return None
        try:
            return registry.task(task).primary_metric.direction
        except Exception:  # noqa: BLE001 - unknown or ambiguous: not a registered task
            return None

    return lookup


def _direction(value: str, where: str) -> Direction:
    try:
        return parse_direction(value)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def _number(text: Any, where: str) -> float | None:
    """A float from a cell; empty means ``None``."""
    if text is None:
        return None
    if isinstance(text, bool):
        raise InputError(f"{where}: expected a number, got {text!r}")
    if isinstance(text, int | float):
        return None if math.isnan(text) else float(text)
    s = str(text).strip()
    if not s or s.lower() in ("nan", "na", "null", "none"):
        return None
    try:
        return float(s)
    except ValueError:
        raise InputError(f"{where}: expected a number, got {s!r}") from None


# --------------------------------------------------------------------------- run directories


def find_results(paths: Iterable[Path | str]) -> list[Path]:
    """Every ``result.json`` of the run directories under ``paths``, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        try:
            found.update(r.result_path for r in iter_run_dirs(p) if r.result_path.is_file())
        except RunDirError as exc:
            raise InputError(str(exc)) from None
    return sorted(found)


def solver_name(result: EpisodeResult, key: str | None = None) -> str:
    """The solver of a result: the agent's short name plus the model (``react/openai_gpt-4o``),
    or the field ``key`` names: ``agent``, ``model``, or a tag."""
    agent = result.agent.rsplit("/", 1)[-1]
    if key is None:
        return f"{agent}/{result.model.replace('/', '_')}" if result.model else agent
    if key == "agent":
        return agent
    if key == "model":
        return result.model or "(no model)"
    tag = key.removeprefix("tag:")
    return result.tags.get(tag, f"(no {tag})")


def _subtask_value(values: Mapping[str, float], metric: str | None) -> float | None:
    if metric is not None and metric in values:
        return _number(values[metric], "")
    if len(values) == 1:
        return _number(next(iter(values.values())), "")
    return None


def _task_key(task: str, profile: str | None, split: set[str]) -> str:
    """The task's name in the tables: ``task@profile`` when its runs used several
    profiles (``task`` in ``split``)."""
    if task in split:
        return f"{task}@{profile}" if profile else f"{task}@default"
    return task


def _reading_key(task: str, profile: str | None) -> str:
    """The key of (task, profile) while :func:`load_runs` reads (no task id holds NUL)."""
    return f"{task}\0{profile or ''}"


def baseline_tolerance(baseline_spec: Any, metric: str | None,
                       baseline: float | None) -> float | None:
    """The baseline's noise for ``metric``: the task spec's ``tolerances[metric]``,
    else its ``tolerance``, else half a unit in the last digit of the recorded
    score (what ``rgym check-pack`` allows; see :class:`rgym_core.specs.Baseline`).
    ``baseline_spec`` is the spec's ``baseline`` section as plain data (``None`` or
    anything malformed: the default).  ``None`` when there is no baseline score."""
    if metric is None or baseline is None:
        return None
    spec = baseline_spec if isinstance(baseline_spec, dict) else {}
    per_metric = spec.get("tolerances")
    for value in ((per_metric or {}).get(metric) if isinstance(per_metric, dict) else None,
                  spec.get("tolerance")):
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and value >= 0:
            return float(value)
    return Baseline(scores={metric: baseline}).tolerance_for(metric)


def _spec_task(run: RunDir | None) -> dict[str, Any] | None:
    """The task spec a run recorded in ``config.json`` (profile applied), or ``None``."""
    if run is None:
        return None
    try:
        task = run.config().get("task")
    except RunDirError:
        return None
    return task if isinstance(task, dict) else None


def _spec_section(run: RunDir | None, section: str) -> Any:
    """A section of the task spec a run recorded in ``config.json`` (profile
    applied), or ``None`` when it has none or cannot be read."""
    task = _spec_task(run)
    return task.get(section) if task is not None else None


def _spec_baseline(run: RunDir | None) -> Any:
    """The ``baseline`` section of the task spec a run recorded in ``config.json``."""
    return _spec_section(run, "baseline")


#: ``rgym score --baselines``: which baseline figures runs are scored against.
BASELINE_SETS = ("auto", "published", "measured")
#: Profiles that reproduce an original benchmark's setting: under ``auto`` their runs
#: are scored against the original's published baselines, as the original scores them.
PUBLISHED_BY_DEFAULT = ("mlgym", "researchgym")


_INSTALLED: dict[tuple[str, str | None], Any] = {}
_REGISTRY: list[Any] = []  # the registry, loaded on the first legacy run


def _installed_sections(task: str, profile: str | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(published, baseline)`` of the installed task ``task`` with ``profile``
    applied, as plain data; ``None`` when it is not installed (cached per process)."""
    key = (task, profile)
    if key not in _INSTALLED:
        found = None
        try:
            from rgym_core.registry import load_registry
            from rgym_core.serialization import unstructure

            if not _REGISTRY:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _REGISTRY.append(load_registry())
            spec = _REGISTRY[0].task(task).with_profile(profile)
            data = unstructure(attrs.evolve(spec, root=None))
            found = (data.get("published") or {}, data.get("baseline") or {})
        except Exception:  # noqa: BLE001 - scoring works without the task installed
            found = None
        _INSTALLED[key] = found
    return _INSTALLED[key]


def choose_baseline(result: EpisodeResult, run: RunDir | None, metric: str | None,
                    baselines: str = "auto") -> tuple[float | None, str | None, str]:
    """``(score, kind, source)`` of the baseline a run is scored against.

    ``kind`` is ``published`` (the original's figure from the spec's
    ``published.baseline``, cited by ``source``) or ``measured`` (rgym's, from the
    result's ``baseline_scores``), ``None`` without one.  ``auto`` takes the
    published figure for the profiles in :data:`PUBLISHED_BY_DEFAULT` (when it has
    one) and the measured one otherwise.  A measured figure the spec marks as
    measured on a test fixture is refused under every choice."""
    if metric is None:
        return None, None, ""
    recorded_task = _spec_task(run)
    published: Any = recorded_task.get("published") if recorded_task is not None else None
    given = recorded_task.get("baseline") if recorded_task is not None else None
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    if recorded_task is not None and "published" not in recorded_task:
        # a run recorded before task specs carried published figures: take them, and where
        # its recorded baseline was measured, from the installed task (same figure only)
        installed = _installed_sections(result.task_id, result.profile)
        if installed is not None:
            published, now = installed
            same = now.get("scores", {}).get(metric) == result.baseline_scores.get(metric)
            if same and "measured_on" not in spec:
                spec = {**spec, "measured_on": now.get("measured_on"),
                        "scores": now.get("scores", {})}
    published = published if isinstance(published, dict) else {}
    pub_scores = published.get("baseline") if isinstance(published.get("baseline"), dict) else {}
    measured = None
    if spec.get("measured_on") not in ("fixture", "published"):
        measured = _number(result.baseline_scores.get(metric), str(result.run_dir or result.run_id))
    pub = pub_scores.get(metric)
    pub = float(pub) if isinstance(pub, int | float) and not isinstance(pub, bool) \
        and math.isfinite(pub) else None
    want = baselines
    if want == "auto":
        comparable = published.get("comparable", True) is not False
        want = ("published" if result.profile in PUBLISHED_BY_DEFAULT and pub is not None
                and comparable else "measured")
    if want == "published":
        if pub is None:
            return None, None, ""
        return pub, "published", str(published.get("source") or "")
    if measured is None:
        scores = spec.get("scores")
        recorded: dict[str, Any] = scores if isinstance(scores, dict) else {}
        on = str(spec.get("measured_on"))
        why = {"fixture": "measured on a test fixture", "published": "published, not reproduced here"}
        refused = on in why and metric in recorded
        return None, None, f"refused: {why[on]}" if refused else ""
    where = ", ".join(str(spec[k]) for k in ("machine", "data") if spec.get(k))
    return measured, "measured", f"rgym, profile {result.profile or 'default'}" + (f": {where}" if where else "")


def _episode_of(result: EpisodeResult, source: str, solver_key: str | None,
                tasks: dict[str, TaskInfo], task: str, run_dir: RunDir | None = None,
                baselines: str = "auto") -> Episode:
    metric = result.primary_metric
    if metric is None:
        metric = next(iter(result.metrics), None)
    if metric is None:
        metric = next((k for r in result.scores if r.valid for k in r.scores), None)
    info = tasks.get(task)
    base, kind, base_source = (None, None, "") if info is not None and info.baseline is not None \
        else choose_baseline(result, run_dir, metric, baselines)
    if info is None or (info.baseline is None and base is not None):
        subs = []
        for sub in result.subtasks:
            sm = sub.metric or metric
            subs.append(SubtaskInfo(
                id=sub.id, metric=sm,
                direction=result.metrics.get(sm, result.direction) if sm and sm != metric
                else result.direction,
                baseline=_number(sub.baseline_scores.get(sm) if sm else None, source),
                reference=_number(sub.reference_scores.get(sm) if sm else None, source),
                weight=float(sub.weight), primary=bool(sub.primary),
                graded=getattr(sub, "graded", True) is not False))
        tasks[task] = TaskInfo(
            task=task, metric=metric, direction=result.direction, baseline=base,
            reference=_number(result.reference_scores.get(metric), source) if metric else None,
            subtasks=tuple(subs),
            baseline_tolerance=baseline_tolerance(_spec_baseline(run_dir) if base is not None
                                                  else None, metric, base),
            baseline_kind=kind, baseline_source=base_source)
    info = tasks[task]
    values = [r.scores[metric] for r in result.scores
              if r.valid and metric is not None and metric in r.scores]
    subtasks: dict[str, float] = {}
    for rec in result.scores:
        if not rec.valid:
            continue
        for sub_info in info.subtasks:
            if sub_info.id in rec.subtasks:
                value = _subtask_value(rec.subtasks[sub_info.id], sub_info.metric)
                if value is not None:
                    subtasks[sub_info.id] = value
    run = str(result.seed) if result.seed is not None else result.run_id
    return Episode(solver=solver_name(result, solver_key), task=task, run=run,
                   values=values, subtasks=subtasks, status=str(result.status),
                   infrastructure=result.status.infrastructure)


def baseline_notes(tasks: Mapping[str, TaskInfo], baselines: str) -> list[str]:
    """One note per baseline set saying which tasks were scored against it."""
    by_kind: dict[str | None, list[str]] = {}
    for name, info in sorted(tasks.items()):
        by_kind.setdefault(info.baseline_kind, []).append(name)
    other = {"auto": "--baselines published|measured chooses one set",
             "published": "--baselines measured uses rgym's measured ones",
             "measured": "--baselines published uses the original's published ones"}[baselines]
    notes: list[str] = []
    refused = [t for t in by_kind.get(None, []) if tasks[t].baseline_source.startswith("refused")]
    if not by_kind.get("published") and not refused and baselines == "auto":
        return notes  # every baseline is rgym's measured one: the tables say so per task
    if by_kind.get("published"):
        cited = sorted({tasks[t].baseline_source for t in by_kind["published"] if tasks[t].baseline_source})
        notes.append(f"note: baselines: published (the original benchmark's figures, as it scores "
                     f"them) for {', '.join(by_kind['published'])}"
                     + (f"; sources: {'; '.join(cited)}" if cited else "") + f" ({other})")
    if by_kind.get("measured"):
        notes.append(f"note: baselines: measured (rgym's own, on the run's profile) for "
                     f"{', '.join(by_kind['measured'])} ({other})")
    if by_kind.get(None):
        why = {"published": "no published figure", "measured": "no measured figure usable for scoring",
               "auto": "no baseline usable for scoring"}[baselines]
        detail = "; ".join(f"{t}: {tasks[t].baseline_source}" for t in refused)
        notes.append(f"note: baselines: none ({why}; a figure measured on a test fixture is never "
                     f"used) for {', '.join(by_kind[None])}" + (f" ({detail})" if detail else ""))
    return notes


def _rename_reserved(data: ScoreData, solver_key: str | None, reserved: Sequence[str]) -> None:
    """Rename the solvers named like the task's own scores (see the module docstring)."""
    names = {ep.solver for ep in data.episodes}
    if not names & set(reserved):
        return
    suffix = {None: "agent", "agent": "agent", "model": "model"}.get(solver_key, "tag")
    tag = (solver_key or "").removeprefix("tag:")
    renames: dict[str, str] = {}
    for name, meaning in zip(reserved, ("baseline", "reference"), strict=True):
        if name not in names or name in renames:
            continue
        new, n = f"{name}-{suffix}", 2
        while new in names or new in reserved:
            new, n = f"{name}-{suffix}-{n}", n + 1
        names.add(new)
        renames[name] = new
        what = f"tag {tag}={name!r}" if suffix == "tag" else f"{suffix} {name!r}"
        data.notes.append(f"note: {what} shown as {new!r} ({name!r} = task's {meaning})")
    for ep in data.episodes:
        ep.solver = renames.get(ep.solver, ep.solver)


def _pending(run: RunDir, state: RunState, solver_key: str | None, problem: str | None) -> PendingRun:
    ident = run.identity()
    solver = None
    if ident.get("agent"):
        agent = str(ident["agent"]).rsplit("/", 1)[-1]
        model = ident.get("model")
        solver = f"{agent}/{str(model).replace('/', '_')}" if model and solver_key is None else agent
    try:
        steps = sum(1 for r in run.records() if r.get("type") == "step")
    except RunDirError:
        steps = 0
    return PendingRun(path=str(run.path), state=state.value, task=ident.get("task"),
                      solver=solver, steps=steps, problem=problem)


def _load_run(run: RunDir, data: ScoreData, solver_key: str | None, strict: bool,
              exclude_flagged: bool, profiles: dict[str, set[str | None]],
              seen: dict[tuple[str, str, str], int]) -> int:
    """Read one run directory into ``data`` (its episode, or a pending entry or a
    warning); returns 1 when its last grading ran unconfined, else 0."""
    if not run.result_path.exists():
        state = run.state()
        data.pending.append(_pending(run, state, solver_key, None))
        return 0
    try:
        result = run.result()
        why = result_problem(result)  # NaN, infinite or negative figures its converter lets through
        if why:
            raise RunDirError(run.result_path, why)
    except RunDirError as exc:
        if strict:
            raise InputError(str(exc)) from None
        data.warnings.append(f"skipped {exc}")
        data.pending.append(_pending(run, RunState.CORRUPT, solver_key, str(exc)))
        return 0
    source = str(run.result_path)
    profiles.setdefault(result.task_id, set()).add(result.profile)
    unconfined = int(bool(result.scores) and result.scores[-1].confined is False)
    try:
        ep = _episode_of(result, source, solver_key, data.tasks,
                         _reading_key(result.task_id, result.profile), run, data.baselines)
    except InputError as exc:
        if strict:
            raise
        data.warnings.append(f"skipped {exc}")
        return unconfined
    key = (ep.solver, ep.task, ep.run)
    if key in seen:
        ep.run = f"{ep.run}:{result.run_id}"
    seen[key] = 1
    summary = integrity_summary(result)
    if summary is not None and summary.get("flagged"):
        ep.flagged = True
        data.flagged.append(FlaggedRun(
            path=str(Path(source).parent), task=ep.task, solver=ep.solver, run=ep.run,
            kinds=tuple(str(k) for k in summary.get("kinds") or ()),
            findings=tuple(str(f.get("message", "")) for f in (summary.get("findings") or [])
                           if isinstance(f, dict) and f.get("severity") == "error")[:3],
            excluded=exclude_flagged))
        if exclude_flagged:
            return unconfined
    data.episodes.append(ep)
    return unconfined


def load_runs(paths: Iterable[Path | str], solver_key: str | None = None, *,
              baseline: str = BASELINE, reference: str = REFERENCE,
              strict: bool = False, exclude_flagged: bool = False,
              baselines: str = "auto") -> ScoreData:
    """Read the run directories under ``paths`` (run directories, runs folders or
    sweep folders).  Two runs of one solver with the same seed stay separate runs
    (their run ids differ).  A solver named ``baseline`` or ``reference`` is
    renamed (see the module docstring).  A ``result.json`` that cannot be read is
    a warning naming it, or an :class:`InputError` when ``strict``; runs without
    a result are listed in ``pending``.  Runs the integrity monitor flagged are
    listed in ``flagged`` and, with ``exclude_flagged``, left out.  ``baselines``
    chooses the baseline figures (see :func:`choose_baseline`); a note says which
    set each task was scored against."""
    if baselines not in BASELINE_SETS:
        raise InputError(f"--baselines {baselines}: choose one of {', '.join(BASELINE_SETS)}")
    data = ScoreData(exclude_flagged=exclude_flagged, baselines=baselines)
    paths = list(paths)
    # Each result is read, turned into its episode and dropped, so memory follows the
    # episodes, not the results' contents.  Until every run is read a task is keyed
    # by task@profile; the tasks whose runs all used one profile get their plain name
    # back at the end.
    profiles: dict[str, set[str | None]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    unconfined = 0
    for p in map(Path, paths):
        try:
            runs = list(iter_run_dirs(p))
        except RunDirError as exc:
            raise InputError(str(exc)) from None
        for run in runs:
            try:
                unconfined += _load_run(run, data, solver_key, strict, exclude_flagged, profiles, seen)
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - a malformed run the checks missed: this run only
                line = f"{run.path}: cannot be read: {type(exc).__name__}: {str(exc)[:300]}"
                if strict:
                    raise InputError(line) from None
                data.warnings.append(f"skipped {line}")
    split = {task for task, names in profiles.items() if len(names) > 1}
    rename = {_reading_key(task, profile): _task_key(task, profile, split)
              for task, names in profiles.items() for profile in names}
    data.tasks = {rename[k]: attrs.evolve(info, task=rename[k]) for k, info in data.tasks.items()}
    for ep in data.episodes:
        ep.task = rename[ep.task]
    data.flagged = [attrs.evolve(f, task=rename[f.task]) for f in data.flagged]
    if unconfined:
        data.warnings.append(f"{unconfined} run(s) were graded without confining the agent's code "
                             "(this machine lacked bubblewrap or a separate user): their scores "
                             "are only as trustworthy as that code")
    data.notes.extend(baseline_notes(data.tasks, baselines))
    for task in sorted(split):
        names = ", ".join(sorted(p or "default" for p in profiles[task]))
        data.notes.append(f"note: runs of {task} used profiles {names}: each profile is scored "
                          f"as its own task ({task}@PROFILE)")
    if data.flagged:
        if exclude_flagged:
            data.notes.append(f"note: {len(data.flagged)} run(s) flagged by the integrity monitor were "
                              "left out (--exclude-flagged); they are listed under \"Flagged runs\"")
        else:
            data.warnings.append(f"{len(data.flagged)} run(s) were flagged by the integrity monitor "
                                 "(listed under \"Flagged runs\"); --exclude-flagged leaves them out")
    if not data.episodes and data.flagged and exclude_flagged:
        shown = ", ".join(str(p) for p in paths) or "(none)"
        raise InputError(f"{shown}: every run with a result was flagged by the integrity monitor and "
                         f"--exclude-flagged left all {len(data.flagged)} out")
    if not data.episodes:
        shown = ", ".join(str(p) for p in paths) or "(none)"
        if data.pending:
            listed = ", ".join(f"{r.path} ({r.state})" for r in data.pending[:5])
            raise InputError(f"{shown}: no run with a readable result.json: {listed}"
                             + (" ..." if len(data.pending) > 5 else ""))
        raise InputError(f"{shown}: no result.json found; pass the runs folder written by `rgym run`")
    _rename_reserved(data, solver_key, (baseline, reference))
    return data


# --------------------------------------------------------------------------- long format


def _readable(path: Path, rows: Iterator[T]) -> Iterator[T]:
    """``rows``, with an undecodable or unreadable file reported as an
    :class:`InputError` naming it."""
    try:
        yield from rows
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


_OPTIONAL = ("direction", "subtask", "primary", "tolerance")
_Cells = tuple[Any, ...]  # solver, task, run, metric, value, direction, subtask, primary, tolerance


def _long_rows(path: Path) -> Iterator[tuple[int, _Cells]]:
    """``(row or line number, cells)`` of a long-format file, in order."""
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        keys = LONG_COLUMNS + _OPTIONAL
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}: line {n}: invalid JSON: {exc.msg}") from None
                if not isinstance(row, dict):
                    raise InputError(f"{path}: line {n}: expected a JSON object")
                yield n, tuple(row.get(k) for k in keys)
        return
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in LONG_COLUMNS if c not in header]
        if missing:
            raise InputError(f"{path}: row 1 (header): missing column(s) {', '.join(missing)}; "
                             f"expected {', '.join(LONG_COLUMNS)} [direction, subtask, primary, "
                             "tolerance]")
        index = [header.index(c) if c in header else None for c in LONG_COLUMNS + _OPTIONAL]
        width = len(header)
        for n, row in enumerate(reader, start=2):
            if len(row) < width:
                if not any(row):
                    continue
                row = row + [""] * (width - len(row))
            yield n, tuple(row[i] if i is not None else None for i in index)


def load_long(path: Path | str, *, baseline: str = BASELINE, reference: str = REFERENCE,
              minimize: Sequence[str] = (), directions: DirectionLookup | None = None) -> ScoreData:
    """Read a long-format CSV or JSON Lines file (see the module docstring).

    A task's primary metric is the one marked ``primary`` (true/1/yes), else the
    first metric seen for it outside sub-tasks; a run's attempts are its rows of
    that metric in file order.  Directions come from the ``direction`` column,
    else from ``directions`` (the registry), else ``minimize``, else maximise.
    Rows of ``baseline`` and ``reference`` are the task's own scores; the
    optional ``tolerance`` column of the baseline's rows is its noise (default:
    half a unit in the last digit of its score), which a run must beat it by to
    count as improved.

    The file is streamed: each row updates the aggregates of its episode (per
    metric the count, the largest, the smallest and the last value), so memory
    follows the episodes, not the rows.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    unit = "line" if path.suffix.lower() in (".jsonl", ".ndjson", ".json") else "row"
    acc = _LongAccumulator(baseline, reference)
    seen_direction: dict[str, Direction] = {}
    for n, cells in _readable(path, _long_rows(path)):
        solver, task, run, metric, text, d, sub, flag, tol = cells
        for col, value in zip(LONG_COLUMNS[:4], (solver, task, run, metric), strict=True):
            if value is None or value == "" or (isinstance(value, str) and not value.strip()):
                raise InputError(f"{path}: {unit} {n}: column '{col}': missing value")
        if text is None:
            raise InputError(f"{path}: {unit} {n}: column 'value': missing value")
        if isinstance(text, str):
            try:
                value = float(text) if text else None
            except ValueError:
                value = _number(text, f"{path}: {unit} {n}: column 'value'")
            if value is not None and math.isnan(value):
                value = None
        else:
            value = _number(text, f"{path}: {unit} {n}: column 'value'")
        task, metric = str(task), str(metric)
        if d:
            parsed = seen_direction.get(d)
            if parsed is None:
                parsed = seen_direction[d] = _direction(str(d), f"{path}: {unit} {n}: column "
                                                                f"'direction'")
            acc.direction_of.setdefault(task, parsed)
        tolerance = None
        if tol is not None and tol != "":
            where = f"{path}: {unit} {n}: column 'tolerance'"
            if str(solver) != baseline:
                raise InputError(f"{where}: only the baseline's rows ({baseline!r}) carry a "
                                 "tolerance; leave it empty on other rows")
            tolerance = _number(tol, where)
            if tolerance is not None and tolerance < 0:
                raise InputError(f"{where}: must be non-negative, got {tol!r}")
        sub = str(sub) if sub else ""
        primary = bool(flag) and str(flag).strip().lower() in ("true", "1", "yes")
        acc.add(str(solver), task, str(run), metric, sub, value, primary, tolerance)
    if not acc.rows:
        raise InputError(f"{path}: no data rows")
    data = acc.build(minimize, directions)
    data.notes.extend(f"note: {path}: {n}" for n in acc.reserved_with_runs())
    return data


class _LongAccumulator:
    """Per-episode aggregates of a long-format file, fed one row at a time."""

    def __init__(self, baseline: str, reference: str) -> None:
        self.baseline, self.reference = baseline, reference
        self.rows = 0
        self.metric_of: dict[str, str] = {}
        self.explicit: set[str] = set()
        self.direction_of: dict[str, Direction] = {}
        self.tasks: dict[str, None] = {}
        self.sub_metric: dict[tuple[str, str], str] = {}
        self.episodes: dict[tuple[str, str, str], Episode] = {}
        #: (solver, task, run, metric) -> [count, largest, smallest, last]
        self.values: dict[tuple[str, str, str, str], list[float]] = {}
        #: the reserved solvers' last values: (solver, task, sub-task) for sub-task rows
        #: (any metric), (solver, task, "", metric) otherwise
        self.special: dict[tuple[str, ...], float] = {}
        #: the reserved solvers' runs: (solver, task, metric) -> {run: last value}
        self.reserved_runs: dict[tuple[str, str, str], dict[str, float]] = {}
        self.tolerance: dict[tuple[str, str], float] = {}
        self._names: dict[str, str] = {}

    def add(self, solver: str, task: str, run: str, metric: str, sub: str, value: float | None,
            primary: bool, tolerance: float | None) -> None:
        """One row (already validated)."""
        self.rows += 1
        names = self._names
        solver = names.setdefault(solver, solver)
        task = names.setdefault(task, task)
        run = names.setdefault(run, run)
        metric = names.setdefault(metric, metric)
        if task not in self.tasks:
            self.tasks[task] = None
        if not sub:
            if primary and task not in self.explicit:
                self.metric_of[task] = metric
                self.explicit.add(task)
            elif task not in self.metric_of:
                self.metric_of[task] = metric
        else:
            sub = names.setdefault(sub, sub)
            self.sub_metric.setdefault((task, sub), metric)
        if solver in (self.baseline, self.reference):
            if tolerance is not None and not sub:
                self.tolerance[(task, metric)] = tolerance
            if value is not None:
                if sub:
                    self.special[(solver, task, sub)] = value
                else:
                    self.special[(solver, task, "", metric)] = value
                    self.reserved_runs.setdefault((solver, task, metric), {})[run] = value
            return
        ep = self.episodes.get((solver, task, run))
        if ep is None:
            ep = self.episodes[(solver, task, run)] = Episode(solver=solver, task=task, run=run)
        if value is None:
            return
        if sub:
            if metric == self.sub_metric[(task, sub)]:
                ep.subtasks[sub] = value
            return
        agg = self.values.get((solver, task, run, metric))
        if agg is None:
            self.values[(solver, task, run, metric)] = [1, value, value, value]
        else:
            agg[0] += 1
            if value > agg[1]:
                agg[1] = value
            if value < agg[2]:
                agg[2] = value
            agg[3] = value

    def reserved_with_runs(self) -> list[str]:
        """A note for each reserved solver whose runs on a task differ: it looks like
        an agent's runs, but it is read as the task's score."""
        notes = []
        for (solver, task, metric), by_run in self.reserved_runs.items():
            if metric == self.metric_of[task] and len(set(by_run.values())) > 1:
                notes.append(f"{solver!r} has {len(by_run)} differing runs on task {task!r}: read "
                             f"as the task's score (last value); name agent runs "
                             f"{solver + '-agent'!r}")
        return notes

    def build(self, minimize: Sequence[str], directions: DirectionLookup | None) -> ScoreData:
        """The episodes (each holding its best and last value and the count of its
        attempts) and the tasks."""
        tasks: dict[str, TaskInfo] = {}
        for task in sorted(self.tasks):
            direction = self.direction_of.get(task) or (directions(task) if directions else None)
            if direction is None:
                direction = "minimize" if task in minimize else "maximize"
            metric = self.metric_of.get(task)
            subs = tuple(SubtaskInfo(id=s, metric=m, direction=direction,
                                     baseline=self.special.get((self.baseline, t, s)),
                                     reference=self.special.get((self.reference, t, s)))
                         for (t, s), m in sorted(self.sub_metric.items()) if t == task)
            base = self.special.get((self.baseline, task, "", metric or ""))
            tolerance = self.tolerance.get((task, metric or ""))
            tasks[task] = TaskInfo(
                task=task, metric=metric, direction=direction, baseline=base,
                reference=self.special.get((self.reference, task, "", metric or "")),
                subtasks=subs,
                baseline_tolerance=tolerance if tolerance is not None and base is not None
                else baseline_tolerance(None, metric, base))
        for (solver, task, run), ep in self.episodes.items():
            agg = self.values.get((solver, task, run, self.metric_of.get(task, "")))
            if agg is None:
                continue
            count, high, low, last = agg
            best = high if tasks[task].direction == "maximize" else low
            ep.values = [best, last] if count > 1 else [last]
            ep.attempts = int(count)
        return ScoreData(tasks=tasks, episodes=list(self.episodes.values()))


# --------------------------------------------------------------------------- wide tables


@define
class WideTables:
    """MLGym's best and last score tables, with each task's direction."""

    best: dict[str, dict[str, float | None]]
    last: dict[str, dict[str, float | None]]
    directions: dict[str, Direction]
    solvers: list[str]


def read_wide(path: Path | str) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """One wide table: its solver columns and ``{task: {solver: score or None}}``."""
    path = Path(path)
    try:
        return _read_wide(path)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save the table as UTF-8 "
                         "CSV") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_wide(path: Path) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header or header[0].strip() != "Task":
            raise InputError(f"{path}: row 1, column 1: expected the header 'Task,<solver>,...', "
                             f"got {','.join(header or [])[:60]!r}")
        solvers = [h.strip() for h in header[1:]]
        for i, s in enumerate(solvers, start=2):
            if not s:
                raise InputError(f"{path}: row 1, column {i}: empty solver name")
        if len(set(solvers)) != len(solvers):
            dup = sorted({s for s in solvers if solvers.count(s) > 1})
            raise InputError(f"{path}: row 1: duplicate solver column(s) {', '.join(dup)}")
        table: dict[str, dict[str, float | None]] = {}
        for n, row in enumerate(reader, start=2):
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise InputError(f"{path}: row {n}: expected {len(header)} cells, got {len(row)}")
            task = row[0].strip()
            if not task:
                raise InputError(f"{path}: row {n}, column 1 (Task): missing task name")
            if task in table:
                raise InputError(f"{path}: row {n}, column 1 (Task): duplicate task {task!r}")
            table[task] = {s: _number(c, f"{path}: row {n}, column {i + 2} ({s})")
                           for i, (s, c) in enumerate(zip(solvers, row[1:], strict=True))}
    if not table:
        raise InputError(f"{path}: no task rows")
    return solvers, table


def load_wide(best_path: Path | str, last_path: Path | str, *, baseline: str = BASELINE,
              minimize: Sequence[str] = (), directions: DirectionLookup | None = None) -> WideTables:
    """Read MLGym's best and last tables.  Rows naming a registered task take its
    direction (``directions``); the others are maximised unless in ``minimize``."""
    best_solvers, best = read_wide(best_path)
    last_solvers, last = read_wide(last_path)
    for path, solvers in ((best_path, best_solvers), (last_path, last_solvers)):
        if baseline not in solvers:
            raise InputError(f"{path}: row 1: no baseline column {baseline!r} "
                             f"(columns: {', '.join(solvers)}); use --baseline-column")
    unknown = [m for m in minimize if m not in best and m not in last]
    if unknown:
        raise InputError(f"{best_path}: column 1 (Task): --minimize names no row: "
                         f"{', '.join(unknown)} (rows: {', '.join(best)})")
    dirs: dict[str, Direction] = {}
    for task in list(best) + [t for t in last if t not in best]:
        if task in minimize:
            dirs[task] = "minimize"
        else:
            dirs[task] = (directions(task) if directions else None) or "maximize"
    solvers = list(dict.fromkeys(best_solvers + last_solvers))
    return WideTables(best=best, last=last, directions=dirs, solvers=solvers)

"""The checks on a finished run directory: for runs made without the monitor, and
to check again with the current rules (``rgym audit RUN_DIR --recheck``).

The task comes from the run's ``config.json`` (the runner records the whole
resolved task spec there), the steps from ``trajectory.jsonl``, the final
workspace from ``workspace.tar.gz``.  What only the live monitor sees (the
workspace listed after every step) is taken from the run's ``integrity.json``
when it has one; otherwise file writes come from the commands alone and the
protected files' start hashes from the task's starter files: a dataset's starter
folder (``starter: true``, prepared again through the registry as the run named
it) then the task's own ``starter_files``, a later file winning.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

from rgym_integrity.checks import run_checks
from rgym_integrity.findings import IntegrityReport, ReportError, read_report
from rgym_integrity.monitor import EpisodeMonitor, _starter_hashes, other_runs_artifacts
from rgym_integrity.policy import resolve_policy
from rgym_integrity.trace import (
    EpisodeTrace,
    FileEvent,
    StepRecord,
    events_from_commands,
    record_outside_writes,
)


class AnalysisError(ValueError):
    """The run directory cannot be analysed; the message names the file."""


def task_of_run(run_dir: Path, registry: Any = None) -> Any:
    """The run's resolved :class:`~rgym_core.specs.TaskSpec`: from ``config.json``
    (its ``task`` and ``task_root``), else from the registry by name."""
    from rgym_core import RunDir, RunDirError, SpecError, TaskSpec, structure

    run = RunDir(run_dir)
    try:
        config = run.config()
    except RunDirError as exc:
        raise AnalysisError(str(exc)) from None
    data = config.get("task")
    if isinstance(data, dict):
        try:
            task = structure(data, TaskSpec, str(run.config_path), strict=False)
        except (SpecError, ValueError, TypeError) as exc:
            raise AnalysisError(f"{run.config_path}: task: {exc}") from None
        root = config.get("task_root")
        if root and root != "None" and Path(root).is_dir():
            import attrs

            task = attrs.evolve(task, root=Path(root))
        return task
    name = config.get("run", {}).get("task") if isinstance(config.get("run"), dict) else None
    if not name:
        raise AnalysisError(f"{run.config_path}: no task recorded")
    if registry is None:
        from rgym_core import load_registry

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            registry = load_registry()
    return registry.task(name).with_profile(config.get("profile"))


def analyze_run_dir(run_dir: Path | str, *, registry: Any = None, keep_audit: bool = True) -> IntegrityReport:
    """Run every check on a finished run directory and return the report (not written).
    A malformed trajectory is an :class:`AnalysisError` naming the folder, line and field."""
    from rgym_core import RunDir, RunDirError, trajectory_problem

    run_dir = Path(run_dir)
    run = RunDir(run_dir)
    problem = trajectory_problem(run)
    if problem:
        raise AnalysisError(problem.removeprefix(f"{run_dir}: "))
    task = task_of_run(run_dir, registry)
    try:
        previous = read_report(run_dir)
    except ReportError:
        previous = None
    start = {}
    try:
        start = run.start_record()
    except (RunDirError, StopIteration, ValueError):
        start = {}
    workspace = ""
    try:
        for record in run.records():
            if record.get("type") == "sandbox":
                workspace = str(record.get("workspace") or "")
                break
    except RunDirError as exc:
        raise AnalysisError(str(exc)) from None
    datasets, dataset_problem = starter_datasets(task, run.config(), registry)
    policy = resolve_policy(task, datasets, run_dir=run_dir, workspace=workspace)
    run_id = str(start.get("run_id") or run_dir.name.rsplit("-", 1)[-1])
    monitor = EpisodeMonitor(policy, None, run_dir, run_id, task_root=task.root)
    trace = monitor.trace
    if dataset_problem or policy.starter_error:
        trace.limits.append(dataset_problem or str(policy.starter_error))
    trace.limits.extend(policy.problems)
    trace.starter_hashes = _starter_hashes(monitor.starter)
    for rel, host_file in sorted(monitor.starter.items()):
        try:
            if host_file.is_file() and not host_file.is_symlink():
                trace.initial[rel] = host_file.stat().st_size
        except OSError:
            continue
    recorded = previous is not None and bool(previous.files or previous.protected)
    try:
        steps = run.steps()
    except (RunDirError, ValueError) as exc:  # SpecError: a step the checks let through
        raise AnalysisError(str(exc)) from None
    for step in steps:
        step_record = StepRecord.from_step(step)
        trace.steps.append(step_record)
        record_outside_writes(step_record, trace)
        if not recorded:
            trace.events.extend(events_from_commands(step_record, trace))
    if recorded and previous is not None:
        trace.events = [FileEvent.from_dict(e) for e in previous.files]
        for path, item in previous.protected.items():
            trace.protected[path] = {"start": item.get("start"),
                                     "hashes": [h for h in item.get("checks", []) if h[1] != "end"]}
    else:
        trace.listed = False
        trace.limits.append("checked after the fact: file writes come from the commands only (the live "
                            "monitor did not record this run)")
        for rel in trace.initial:
            if policy.is_protected(rel):
                trace.protected[rel] = {"start": _sha(monitor.starter[rel]), "hashes": []}
    trace.scores, trace.history, problem = gradings_of(run)
    if problem:
        trace.limits.append(problem)
    monitor._final_workspace()
    try:
        trace.other_artifacts = other_runs_artifacts(run_dir, policy.task_id, own=run_id)
    except Exception as exc:  # noqa: BLE001
        trace.limits.append(f"other runs could not be searched for reuse ({exc})")
    findings, ran, problems = run_checks(trace)
    trace.limits.extend(problems)
    report = monitor.report(findings, ran)
    report.cost = {"analysed_after_the_fact": True}
    if keep_audit and previous is not None:
        report.audit = previous.audit
    return report


def check_graded_run(run_dir: Path, result: Any = None, *, registry: Any = None) -> IntegrityReport | None:
    """What the ``rgym_run_graded`` hook does after ``rgym grade``: run every check on
    the run directory, write ``integrity.json`` and put the summary into
    ``result.extras["integrity"]``.  ``None`` when the task turns the monitor off.
    Never raises: a run that cannot be analysed gets a report saying why in its
    limits (and keeps an earlier report's findings)."""
    from rgym_integrity.findings import EXTRAS_KEY, write_report

    try:
        task = task_of_run(run_dir, registry)
        if not bool(getattr(getattr(task, "integrity", None), "enabled", True)):
            return None
        report = analyze_run_dir(run_dir, registry=registry)
    except Exception as exc:  # noqa: BLE001 - the grading stands whatever the monitor meets
        try:
            report = read_report(run_dir) or IntegrityReport(run_id=Path(run_dir).name, task="")
        except ReportError:
            report = IntegrityReport(run_id=Path(run_dir).name, task="")
        report.limits.append(f"rgym grade: the run could not be checked again ({type(exc).__name__}: {exc})")
    try:
        write_report(run_dir, report)
    except OSError as exc:
        report.limits.append(f"integrity.json could not be written: {exc}")
    extras = getattr(result, "extras", None)
    if isinstance(extras, dict):
        extras[EXTRAS_KEY] = report.summary()
    return report


def gradings_of(run: Any) -> tuple[list[Any], list[Any], str | None]:
    """A run directory's gradings: the result's (``result.json``, else the
    trajectory's), every grading the trajectory recorded (also those a regrade
    replaced), and a limits line when there is no ``result.json``."""
    from rgym_core import RunDirError

    try:
        history = list(run.scores())
    except (RunDirError, OSError, ValueError):
        history = []
    try:
        return list(run.result().scores), history, None
    except RunDirError:
        return history, history, "the run has no result.json: its gradings come from the trajectory"


def refresh_snapshot_findings(run_dir: Path | str, report: IntegrityReport) -> bool:
    """Compare the run directory's archives with its gradings again (the ``snapshot``
    check) and put the answer in ``report`` in place of its earlier snapshot findings:
    an ``integrity.json`` written before an archive was replaced must not vouch for it.
    Returns True when the findings changed."""
    from rgym_core import RunDir
    from rgym_integrity.checks import snapshot
    from rgym_integrity.findings import Kind
    from rgym_integrity.policy import IntegrityPolicy

    trace = EpisodeTrace(policy=IntegrityPolicy(task_id=report.task), run_dir=Path(run_dir), run_id=report.run_id)
    trace.scores, trace.history, _ = gradings_of(RunDir(Path(run_dir)))
    fresh = snapshot.check(trace)
    kept = [f for f in report.findings if f.kind is not Kind.SNAPSHOT]
    old = [f.to_dict() for f in report.findings if f.kind is Kind.SNAPSHOT]
    if old == [f.to_dict() for f in fresh]:
        return False
    report.findings = [*kept, *fresh]
    if "snapshot" not in report.checks:
        report.checks.append("snapshot")
    return True


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def starter_datasets(task: Any, config: Any, registry: Any = None) -> tuple[dict[str, Any], str | None]:
    """The dataset that supplies ``task``'s starter files (``starter: true``), prepared
    again on the host as the run named it (``config.json``'s ``run.datasets`` and
    ``run.data_dir``), by mount; and why it could not be (``None`` when it was, or
    when the task takes no starter from a dataset).  Only that dataset is prepared:
    the analysis needs its starter folder, not the others' data."""
    mount = getattr(task, "starter_dataset", None)
    if mount is None:
        return {}, None
    found = config.get("run") if isinstance(config, dict) else None
    run: dict[str, Any] = found if isinstance(found, dict) else {}
    chosen: dict[str, Any] = run["datasets"] if isinstance(run.get("datasets"), dict) else {}
    try:
        import attrs

        from rgym_core import RunConfig, resolve_datasets

        if registry is None:
            from rgym_core import load_registry

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                registry = load_registry()
        data_dir = run.get("data_dir")
        own = RunConfig(task=task.id, datasets={k: str(v) for k, v in chosen.items() if k == mount.mount},
                        data_dir=Path(data_dir) if data_dir and data_dir != "None" else None)
        return resolve_datasets(registry, attrs.evolve(task, datasets=[mount]), own), None
    except Exception as exc:  # noqa: BLE001 - not registered, not downloadable, a broken prepare function
        return {}, (f"the starter files of dataset '{chosen.get(mount.mount) or mount.id}' could not be "
                    f"prepared ({type(exc).__name__}: {exc}); only the task's own starter files are known")


__all__ = ["AnalysisError", "analyze_run_dir", "check_graded_run", "gradings_of", "refresh_snapshot_findings", "starter_datasets",
           "task_of_run"]

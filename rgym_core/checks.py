"""``rgym check-pack``: check a pack before it is published.

Static checks (specs load, with every profile; files exist; graders compile and
their imports resolve; exactly one primary metric; a ``name``), then, unless
``--fast``, each task's baseline is run for real: its ``baseline.command`` in a
fresh local sandbox with the starter files, then the task's grader on the
result, once per profile.  Each measured score must be within the tolerance the
spec states (:meth:`~rgym_core.specs.Baseline.tolerance_for`) of the recorded
one; a grader that fails or leaves out a metric is an error.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.packs import TASK_FILE, load_task
from rgym_core.serialization import SpecError
from rgym_core.specs import TaskSpec

#: The namespace under which check-pack registers the tasks it runs.
CHECK_NAMESPACE = "check-pack"


@define
class Finding:
    """One check: where (a file, or ``file [profile p]``), whether it passed, and why.
    A skipped check (it could not run here, e.g. a dataset is missing) is not a failure."""

    where: str
    ok: bool
    message: str
    skipped: bool = False


@define
class PackReport:
    path: Path
    findings: list[Finding] = field(factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings) and bool(self.findings)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]

    def add(self, where: str, ok: bool, message: str, *, skipped: bool = False) -> None:
        self.findings.append(Finding(where, ok, message, skipped))

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "ok": self.ok,
                "findings": [{"where": f.where, "ok": f.ok, "skipped": f.skipped, "message": f.message}
                             for f in self.findings]}

    def print(self) -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()
        for f in self.findings:
            mark = "[yellow]skip[/yellow]" if f.skipped else "[green]ok[/green]  " if f.ok else "[red]FAIL[/red]"
            console.print(f"{mark} {escape(f.where)}: {escape(f.message)}", highlight=False,
                          soft_wrap=True)
        verdict = "[green]pack OK[/green]" if self.ok else "[red]pack has problems[/red]"
        skipped = sum(f.skipped for f in self.findings)
        console.print(f"{verdict} ({len(self.problems)} problem(s), {len(self.findings)} checks"
                      + (f", {skipped} skipped" if skipped else "") + ")")


def _missing_imports(script: Path, local: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Top-level modules imported by ``script`` that cannot be found (modules next
    to the script and names in ``local`` count as found)."""
    tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    missing = []
    for name in sorted(names):
        if (script.parent / f"{name}.py").exists() or (script.parent / name).is_dir() or name in local:
            continue
        if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
            continue
        missing.append(name)
    return missing


def check_metadata(task: TaskSpec, report: PackReport, where: str) -> None:
    """Checks of the spec itself that loading does not enforce."""
    report.add(where, bool(task.name.strip()), "has a 'name'" if task.name.strip() else
               "'name' is missing: give the task a human-readable title (name: ...)")
    primaries = [m.name for m in task.metrics if m.primary]
    report.add(where, len(primaries) == 1,
               f"exactly one primary metric ({primaries[0]})" if len(primaries) == 1 else
               f"metrics: mark exactly one metric 'primary: true' (found {len(primaries)})")


def check_task(task: TaskSpec, report: PackReport, where: str) -> None:
    """Static checks of one task (as one profile configures it)."""
    starter = task.path(task.starter_files)
    supplier = task.starter_dataset
    if task.starter_files is not None:
        # with a dataset supplying the starter files, the task's own folder is optional
        has_own = bool(starter and starter.is_dir())
        if has_own or supplier is None:
            report.add(where, has_own, f"starter files folder '{task.starter_files}'"
                       + ("" if has_own else " is missing"))
    shared = task.starter_paths()[:len(task.shared_starter_files)]
    for written, folder in shared:
        exists = bool(folder and folder.is_dir())
        report.add(where, exists, f"shared starter files folder '{written}'" + ("" if exists else " is missing"))
    if supplier is not None:
        report.add(where, True, f"starter files from dataset '{supplier.id}' (mount '{supplier.mount}', "
                   f"starter: true), prepared when the baseline runs")
    grader_dir = task.path(task.grader.files)
    entry = grader_dir / task.grader.entry if grader_dir else None
    if grader_dir is None or not grader_dir.is_dir():
        report.add(where, False, f"grader folder '{task.grader.files}' is missing")
    elif entry is None or not entry.is_file():
        report.add(where, False, f"grader entry '{task.grader.files}/{task.grader.entry}' is missing")
    else:
        try:
            compile(entry.read_text(encoding="utf-8"), str(entry), "exec")
            from rgym_core.grader_protocol import KIT_PACKAGE

            local = {KIT_PACKAGE}  # the runner copies the grader kit next to every grader
            for source, name in task.grader.include.items():
                found = task.path(source)
                report.add(where, bool(found and found.exists()), f"grader.include '{source}'"
                           + ("" if found and found.exists() else " is missing"))
                local.add(Path(name).stem if name.endswith(".py") else Path(name).parts[0])
            missing = _missing_imports(entry, local)
            report.add(where, not missing, "grader compiles and its imports resolve" if not missing
                       else f"grader imports modules that are not installed: {', '.join(missing)}")
        except (SyntaxError, ValueError) as exc:
            report.add(where, False, f"grader does not compile: {exc}")
    if starter and grader_dir and starter.is_dir() and grader_dir.is_dir():
        check_no_leak(grader_dir, starter, report, where)
    for written, folder in shared:
        if folder and grader_dir and folder.is_dir() and grader_dir.is_dir():
            check_no_leak(grader_dir, folder, report, where, f" of '{written}'")
    names = {m.name for m in task.metrics}
    recorded = task.baseline.scores if task.baseline else {}
    unknown = sorted(set(recorded) - names)
    report.add(where, not unknown, "baseline scores name known metrics" if not unknown
               else f"baseline scores name unknown metrics: {', '.join(unknown)}")
    for i, item in enumerate(task.scripted_actions):
        if not isinstance(item, dict) or "tool" not in item:
            report.add(where, False, f"scripted_actions[{i}] needs a 'tool'")


def check_baseline_kinds(task: TaskSpec, report: PackReport, where: str) -> None:
    """Say which baseline figures a profile carries: rgym's measured ones (and where
    they were measured) and the original's published ones (and their source)."""
    baseline = task.baseline
    if baseline is not None and baseline.scores:
        if baseline.on_fixture:
            report.add(where, True, "baseline scores were measured on a test fixture "
                       "(baseline.measured_on: fixture): check-pack reproduces them, scoring and "
                       "the agent's prompt never use them")
        elif baseline.measured_on == "published":
            report.add(where, True, "baseline scores are the original's published figures, not "
                       "reproduced here (baseline.measured_on: published): --baselines measured "
                       "never uses them")
        elif baseline.measured_on is None:
            report.add(where, True, "baseline scores do not say where they were measured: set "
                       "baseline.measured_on (data or fixture), baseline.machine and baseline.data")
        else:
            report.add(where, True, "baseline scores measured on the profile's data"
                       + (f" ({baseline.machine})" if baseline.machine else ""))
    if task.published.baseline or task.published.reference:
        report.add(where, True, f"published figures cited: {task.published.source[:80]}")


def check_no_leak(grader_dir: Path, starter: Path, report: PackReport, where: str, what: str = "") -> None:
    """No file of the hidden grader folder is copied, byte for byte, among the starter files."""
    leaked = sorted(p.name for p in grader_dir.iterdir() if (starter / p.name).is_file()
                    and p.is_file() and p.read_bytes() == (starter / p.name).read_bytes())
    report.add(where, not leaked, f"no hidden grader file is copied in the starter files{what}" if not leaked
               else f"hidden grader files also in the starter files{what}: {', '.join(leaked)}")


def _declared_names(pyproject: Path) -> set[str] | None:
    from rgym_core.provides import declared_in

    declared = declared_in(pyproject.parent)
    return {p.name for p in declared} if declared else None


def check_pack(path: Path, *, profiles: list[str] | None = None, run_baselines: bool = True,
               data_dir: Path | None = None,
               progress: Callable[[str], None] | None = None) -> PackReport:
    """Check every task under ``path`` (a pack folder, a task folder or a task.yaml).

    ``profiles`` limits the profiles checked (default: each task's every profile);
    ``run_baselines=False`` (``--fast``) skips running the baselines.
    """
    path = path.resolve()
    report = PackReport(path)
    pyproject = path / "pyproject.toml"
    is_pack = path.is_dir() and not (path / TASK_FILE).is_file()
    if is_pack and not pyproject.is_file():
        report.add("pyproject.toml", False, "missing: a pack is a distribution with its own "
                   "pyproject.toml declaring [project.entry-points.rgym]")
    if is_pack and not (path / "tests").is_dir():
        report.add("tests/", False, "missing: a pack ships tests of its graders (see CONTRIBUTING.md)")
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
            eps = data.get("project", {}).get("entry-points", {}).get("rgym", {})
            report.add("pyproject.toml", bool(eps), "declares entry points in the 'rgym' group"
                       if eps else "has no [project.entry-points.rgym] table: rgym cannot find the pack")
        except tomllib.TOMLDecodeError as exc:
            report.add("pyproject.toml", False, f"invalid TOML: {exc}")
    files = [path] if path.is_file() else sorted(path.rglob(TASK_FILE))
    files = [f for f in files if "build" not in f.parts and ".egg-info" not in str(f)]
    if not files:
        report.add(str(path), False, f"no {TASK_FILE} found")
    declared = _declared_names(pyproject) if pyproject.is_file() else None
    seen: dict[str, Path] = {}
    loaded: list[tuple[Path, TaskSpec]] = []
    for file in files:
        where = _relative(file, path)
        try:
            task = load_task(file)
        except SpecError as exc:
            report.add(_relative(Path(exc.source), path), False, f"{exc.field}: {exc.message}")
            continue
        if task.id in seen:
            report.add(where, False, f"task id '{task.id}' is also used by {seen[task.id]}")
        seen[task.id] = file
        report.add(where, True, f"task '{task.id}' loads")
        check_metadata(task, report, where)
        if declared is not None:
            report.add(where, task.id in declared, "declared in [project.entry-points.\"rgym.provides\"]"
                       if task.id in declared else f"'{task.id}' is missing from [project.entry-points."
                       f"\"rgym.provides\"] in pyproject.toml: install hints will not name it")
        for i, (name, spec) in enumerate(_profiles_of(task, profiles, report, where)):
            profile = task.profiles.get(name) if name else None
            # The files are the same in every profile unless it changes the grader or datasets.
            if i == 0 or (profile is not None and (profile.grader is not None or profile.datasets is not None)):
                check_task(spec, report, _where(where, name if i else None))
            check_baseline_kinds(spec, report, _where(where, name))
        loaded.append((file, task))
    if run_baselines:
        for file, task in loaded:
            for name, spec in _profiles_of(task, profiles, None, str(file)):
                check_baseline(spec, report, _where(_relative(file, path), name), data_dir=data_dir,
                               progress=progress)
    return report


def _relative(file: Path, root: Path) -> str:
    try:
        return str(file.relative_to(root if root.is_dir() else root.parent))
    except ValueError:
        return str(file)


def _where(where: str, profile: str | None) -> str:
    return f"{where} [profile {profile}]" if profile else where


def _profiles_of(task: TaskSpec, wanted: list[str] | None, report: PackReport | None,
                 where: str) -> list[tuple[str | None, TaskSpec]]:
    """``(profile, resolved spec)`` for each profile to check (``(None, task)`` for a
    task without profiles)."""
    if not task.profiles:
        if wanted and report is not None:
            report.add(where, True, f"has no profiles; checked as it is (asked for {', '.join(wanted)})",
                       skipped=True)
        return [(None, task)]
    names = [n for n in task.profile_names if wanted is None or n in wanted]
    if wanted and report is not None:
        for name in wanted:
            if name not in task.profiles:
                report.add(where, True, f"has no profile '{name}' (its profiles: "
                           f"{', '.join(task.profile_names)})", skipped=True)
    return [(n, task.with_profile(n)) for n in names]


# --------------------------------------------------------------------------- baseline runs


class _BaselineAgent:
    """Runs the task's baseline command once, then submits (check-pack's own agent)."""

    def __init__(self, command: str | None) -> None:
        self.plan: list[Any] = []
        self.command = command

    def start(self, context: Any) -> None:
        from rgym_core.records import Action

        self.plan = ([Action.bash(self.command, thought="run the baseline")] if self.command else [])
        self.plan.append(Action(tool="submit", thought="grade the baseline's output"))

    def act(self, observation: Any) -> Any:
        from rgym_core.records import Action

        return self.plan.pop(0) if self.plan else Action(tool="submit")


class _CheckPlugin:
    """Registers the task under check (renamed into the check-pack namespace, so an
    installed copy of the pack does not collide) and the baseline agent."""

    def __init__(self, task: TaskSpec) -> None:
        self.task = task

    def rgym_register_tasks(self) -> list[TaskSpec]:
        return [self.task]

    def rgym_register_agents(self) -> list[Any]:
        from rgym_core.agents import AgentSpec

        command = self.task.baseline.command if self.task.baseline else None
        return [AgentSpec(name=f"{CHECK_NAMESPACE}/baseline", factory=lambda config: _BaselineAgent(command),
                          description="runs the baseline command and submits")]


def _mark_hooks(plugin: type) -> type:
    from rgym_core.hookspecs import hookimpl

    for name in ("rgym_register_tasks", "rgym_register_agents"):
        setattr(plugin, name, hookimpl(getattr(plugin, name)))
    return plugin


def check_baseline(task: TaskSpec, report: PackReport, where: str, *, data_dir: Path | None = None,
                   progress: Callable[[str], None] | None = None) -> None:
    """Run the baseline of ``task`` (already resolved for its profile) and compare
    its scores with the recorded ones."""
    baseline = task.baseline
    if baseline is None or (not baseline.scores and not baseline.command):
        report.add(where, True, "no baseline recorded: nothing to run", skipped=True)
        return
    if task.resources.gpus and visible_gpus() < task.resources.gpus:
        report.add(where, True, f"baseline not run: it needs {task.resources.gpus} GPU(s) and this "
                   f"machine has {visible_gpus()}", skipped=True)
        return
    from rgym_core.registry import RegistryError, load_registry
    from rgym_core.runner import RunConfig, RunError, run_episode

    check_id = f"{CHECK_NAMESPACE}/{task.id.replace('/', '--')}"
    spec = attrs.evolve(task, id=check_id)
    if progress is not None:
        label = f" [profile {task.profile}]" if task.profile else ""
        progress(f"running the baseline of {task.id}{label}...")
    plugin = _mark_hooks(type("CheckPlugin", (_CheckPlugin,), {}))(spec)
    try:
        registry = load_registry(extra_plugins=[("rgym-check-pack", plugin)], lazy=True)
        for mount in task.datasets:
            if mount.id not in registry.datasets:
                report.add(where, True, f"baseline not run: dataset '{mount.id}' is not registered "
                           f"(install the pack, e.g. pip install -e {report.path})", skipped=True)
                return
        values: dict[str, Any] = {"task": check_id, "agent": f"{CHECK_NAMESPACE}/baseline",
                                  "sandbox": "local", "data_dir": data_dir, "archive_workspace": False}
        if "profile" in attrs.fields_dict(RunConfig):
            values["profile"] = task.profile
        with tempfile.TemporaryDirectory(prefix="rgym-check-") as tmp:
            values["runs_dir"] = Path(tmp)
            result = run_episode(RunConfig(**values), registry)
            command_note = _command_outcome(Path(str(result.run_dir))) if result.run_dir else ""
    except (RunError, RegistryError, SpecError) as exc:
        message = str(exc)
        missing_data = "dataset" in message and ("not found" in message or "missing" in message)
        report.add(where, missing_data, f"baseline not run: {message}", skipped=missing_data)
        return
    scores = result.final_scores
    if scores is None:
        error = (result.error or result.status.value).strip()
        report.add(where, False, f"the grader gave no valid score for the baseline "
                   f"({result.status.value}): {_tail(error)}{command_note}")
        return
    report.add(where, True, "the grader scored the baseline: " +
               ", ".join(f"{k}={v:.6g}" for k, v in sorted(scores.items())))
    for metric, recorded in sorted(baseline.scores.items()):
        if metric not in scores:
            report.add(where, False, f"baseline: the grader did not report '{metric}' "
                       f"(recorded {recorded:.6g})")
            continue
        tolerance = baseline.tolerance_for(metric)
        measured = scores[metric]
        close = abs(measured - recorded) <= tolerance
        report.add(where, close, f"baseline {metric}: measured {measured:.6g}, recorded {recorded:.6g}"
                   + (f" (within {tolerance:.2g})" if close else
                      f": off by {abs(measured - recorded):.3g}, more than the tolerance {tolerance:.3g}; "
                      f"re-measure the baseline or state baseline.tolerance"))
    unknown = sorted(set(scores) - {m.name for m in task.metrics})
    if unknown:
        report.add(where, False, f"the grader reports metrics the spec does not list: {', '.join(unknown)}")
    if task.starter_dataset is not None:
        _check_dataset_starter(spec, registry, report, where, data_dir)


def _check_dataset_starter(task: TaskSpec, registry: Any, report: PackReport, where: str,
                           data_dir: Path | None) -> None:
    """The starter files a dataset supplies (prepared for the baseline run, so cached now)
    hold no hidden grader file."""
    from rgym_core.datasets import DatasetError, starter_folders
    from rgym_core.runner import RunConfig, RunError, resolve_datasets

    mount = task.starter_dataset
    grader_dir = task.path(task.grader.files)
    if mount is None or grader_dir is None or not grader_dir.is_dir():
        return
    try:
        prepared = resolve_datasets(registry, task, RunConfig(task=task.id, data_dir=data_dir))
        folders = starter_folders(task, {mount.mount: prepared[mount.mount]})
    except (DatasetError, RunError) as exc:
        report.add(where, False, f"the starter files of dataset '{mount.id}' cannot be prepared: {exc}")
        return
    for folder in folders[:1]:
        check_no_leak(grader_dir, folder, report, where, f" of dataset '{mount.id}'")


def _command_outcome(run_dir: Path) -> str:
    """``; the baseline command ...`` when it failed or timed out (read from the trajectory)."""
    from rgym_core.rundir import RunDir, RunDirError

    try:
        steps = RunDir(run_dir).steps()
    except (RunDirError, OSError):
        return ""
    for step in steps:
        if step.action.tool != "bash":
            continue
        obs = step.observation
        if obs.info.get("timed_out") or obs.exit_code == 124:
            return (f"; the baseline command timed out after {step.duration_s:.0f} s (budget.action_timeout_s:"
                    f" raise it for this profile, or make the baseline smaller)")
        if obs.exit_code not in (0, None):
            return f"; the baseline command exited with code {obs.exit_code}: {_tail(obs.output, 4)}"
    return ""


def visible_gpus() -> int:
    """The NVIDIA GPUs this machine shows (``nvidia-smi -L``), 0 without the tool."""
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        done = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])

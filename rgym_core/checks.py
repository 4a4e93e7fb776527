"""``rgym check-pack``: static checks of a pack before it is published."""

from __future__ import annotations

import ast
import importlib.util
import sys
import tomllib
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.packs import TASK_FILE, load_task
from rgym_core.serialization import SpecError
from rgym_core.specs import TaskSpec


@define
class Finding:
    where: str
    ok: bool
    message: str


@define
class PackReport:
    path: Path
    findings: list[Finding] = field(factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings) and bool(self.findings)

    def add(self, where: str, ok: bool, message: str) -> None:
        self.findings.append(Finding(where, ok, message))

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "ok": self.ok,
                "findings": [{"where": f.where, "ok": f.ok, "message": f.message} for f in self.findings]}

    def print(self) -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()
        for f in self.findings:
            mark = "[green]ok[/green]  " if f.ok else "[red]FAIL[/red]"
            console.print(f"{mark} {escape(f.where)}: {escape(f.message)}", highlight=False,
                          soft_wrap=True)
        verdict = "[green]pack OK[/green]" if self.ok else "[red]pack has problems[/red]"
        console.print(f"{verdict} ({sum(not f.ok for f in self.findings)} problem(s), "
                      f"{len(self.findings)} checks)")


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


def check_task(task: TaskSpec, report: PackReport, where: str) -> None:
    starter = task.path(task.starter_files)
    if task.starter_files is not None:
        report.add(where, bool(starter and starter.is_dir()),
                   f"starter files folder '{task.starter_files}'" + ("" if starter and starter.is_dir()
                                                                     else " is missing"))
    grader_dir = task.path(task.grader.files)
    entry = grader_dir / task.grader.entry if grader_dir else None
    if grader_dir is None or not grader_dir.is_dir():
        report.add(where, False, f"grader folder '{task.grader.files}' is missing")
    elif entry is None or not entry.is_file():
        report.add(where, False, f"grader entry '{task.grader.files}/{task.grader.entry}' is missing")
    else:
        try:
            compile(entry.read_text(encoding="utf-8"), str(entry), "exec")
            local = set()
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
        leaked = sorted(p.name for p in grader_dir.iterdir() if (starter / p.name).exists()
                        and p.is_file() and p.read_bytes() == (starter / p.name).read_bytes())
        report.add(where, not leaked, "no hidden grader file is copied in the starter files" if not leaked
                   else f"hidden grader files also in the starter files: {', '.join(leaked)}")
    names = {m.name for m in task.metrics}
    unknown = sorted(set(task.baseline_scores) - names)
    report.add(where, not unknown, "baseline scores name known metrics" if not unknown
               else f"baseline scores name unknown metrics: {', '.join(unknown)}")
    for i, item in enumerate(task.scripted_actions):
        if not isinstance(item, dict) or "tool" not in item:
            report.add(where, False, f"scripted_actions[{i}] needs a 'tool'")


def check_pack(path: Path) -> PackReport:
    """Check every task under ``path`` (a pack folder, a task folder or a task.yaml)."""
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
    seen: dict[str, Path] = {}
    for file in files:
        where = str(file)
        try:
            task = load_task(file)
        except SpecError as exc:
            report.add(exc.source, False, f"{exc.field}: {exc.message}")
            continue
        if task.id in seen:
            report.add(where, False, f"task id '{task.id}' is also used by {seen[task.id]}")
        seen[task.id] = file
        report.add(where, True, f"task '{task.id}' loads")
        check_task(task, report, where)
    return report

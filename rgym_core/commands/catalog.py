"""``rgym list`` and ``rgym show TASK``: what is installed, and one task in full."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from rgym_core.cli import get_registry
from rgym_core.commands.table import format_table
from rgym_core.registry import Registry, RegistryError
from rgym_core.serialization import SpecError, unstructure
from rgym_core.specs import Budget, Resources, SubTask, TaskSpec

LIST_KINDS = {"tasks": "tasks", "datasets": "datasets", "agents": "agents", "tools": "tools",
              "sandboxes": "sandboxes", "models": "model_providers", "plugins": "plugins"}


def _rows(registry: Registry, kind: str) -> list[dict[str, Any]]:
    if kind == "plugins":
        return [{"name": p.name, "distribution": p.distribution, "version": p.version,
                 "loaded": p.loaded, "error": p.error} for p in registry.plugins]
    rows = []
    for name, reg in sorted(registry.table(LIST_KINDS[kind]).items()):
        item = reg.item
        desc = getattr(item, "description", "") or getattr(getattr(item, "schema", None), "description", "")
        row: dict[str, Any] = {"name": name, "distribution": reg.distribution,
                               "description": " ".join(str(desc).split())}
        if kind == "tasks":
            row["title"] = item.name
            row["primary_metric"] = f"{item.primary_metric.name} ({item.primary_metric.direction})"
            row["profiles"] = item.profile_names
        if kind == "tools":
            row["default"] = item.default
        rows.append(row)
    return rows


@click.command("list")
@click.argument("kind", type=click.Choice(sorted(LIST_KINDS)), default="tasks")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def list_cmd(ctx: click.Context, kind: str, as_json: bool) -> None:
    """List installed tasks, agents, tools, sandboxes, datasets, models or plugins."""
    rows = _rows(get_registry(ctx), kind)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if kind == "tasks":
        columns = ["name", "primary_metric", "profiles", "distribution", "title"]
    elif kind == "plugins":
        columns = ["name", "distribution", "version", "loaded", "error"]
    else:
        columns = [c for c in (rows[0] if rows else {"name": 1, "distribution": 1}) if c != "description"]
        columns.append("description")
    if not rows:
        click.echo(f"No {kind} installed. Install a pack, e.g. pip install rgym-task-<name> "
                   f"(`rgym list plugins` shows what loaded).")
        return
    click.echo(format_table(rows, columns))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _budget_text(b: Budget) -> str:
    parts = [f"max_steps={b.max_steps}", f"time_limit_s={b.time_limit_s:g}" if b.time_limit_s else
             "time_limit_s=none", f"action_timeout_s={b.action_timeout_s:g}"]
    if b.training_timeout_s is not None:
        parts.append(f"training_timeout_s={b.training_timeout_s:g}")
    if b.cost_limit_usd is not None:
        parts.append(f"cost_limit_usd={b.cost_limit_usd:g}")
    if b.token_limit is not None:
        parts.append(f"token_limit={b.token_limit}")
    return " ".join(parts)


def _resources_text(r: Resources) -> str:
    fields = [("memory_mb", r.memory_mb), ("cpus", r.cpus), ("pids", r.pids),
              ("disk_mb", getattr(r, "disk_mb", None)), ("gpus", r.gpus or None)]
    parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields if v is not None]
    parts.append(f"network={'on' if r.network else 'off'}")
    if r.image:
        parts.append(f"image={r.image}")
    return " ".join(parts) + ("  (unset limits get the sandbox's defaults)" if None in
                              (r.memory_mb, r.pids) else "")


def _scores_text(scores: dict[str, float]) -> str:
    return ", ".join(f"{k}={_number(v)}" for k, v in scores.items()) or "-"


def subtasks_text(subtasks: list[SubTask]) -> str:
    """``id (primary, metric, baseline x)`` per sub-task, comma-separated."""
    out = []
    for sub in subtasks:
        notes = ["primary"] if sub.primary else []
        if not sub.graded:
            notes.append("not graded by rgym")
        if sub.metric:
            notes.append(sub.metric)
        base = sub.baseline_scores.get(sub.metric) if sub.metric else None
        if base is not None:
            notes.append(f"baseline {_number(base)}")
        out.append(f"{sub.id} ({', '.join(notes)})" if notes else sub.id)
    return ", ".join(out)


#: The heading of a pack README's divergence table (``rgym show`` links to it).
DIVERGENCE_HEADING = "Divergences from the original"
DIVERGENCE_ANCHOR = "divergences-from-the-original"


def divergence_link(task: TaskSpec) -> str | None:
    """``README.md#divergences-from-the-original`` of the task's pack (the first
    folder above the task holding a ``README.md`` beside a ``pyproject.toml``), or
    ``None`` when the pack's sources are not on this machine (a wheel install) or
    its README has no such section (a task that reimplements no original)."""
    if task.root is None:
        return None
    for folder in [task.root, *task.root.resolve().parents]:
        readme = folder / "README.md"
        if readme.is_file() and (folder / "pyproject.toml").is_file():
            try:
                text = readme.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None
            return f"{readme}#{DIVERGENCE_ANCHOR}" if f"## {DIVERGENCE_HEADING}" in text else None
    return None


def baseline_text(spec: TaskSpec) -> str:
    """rgym's measured baseline, and where it was measured."""
    b = spec.baseline
    if b is None or not b.scores:
        return "not measured"
    text = _scores_text(b.scores)
    if b.on_fixture:
        return f"{text} [measured on a test fixture: never used for scoring or shown to the agent]"
    if b.measured_on == "published":
        return f"{text} [not measured by rgym: the original's published figures, copied]"
    where = "; ".join(x for x in (b.machine, b.data) if x)
    return f"{text}" + (f" [measured by rgym on {where}]" if where else "")


def published_text(spec: TaskSpec) -> str | None:
    """The original's published figures and their source, or ``None``."""
    pub = spec.published
    if not pub.baseline and not pub.reference:
        return None
    parts = []
    if pub.baseline:
        parts.append(f"baseline {_scores_text(pub.baseline)}")
    if pub.reference:
        parts.append(f"reference {_scores_text(pub.reference)}")
    comparable = "" if pub.comparable else "; not comparable with rgym's metric: never scored against by default"
    return ", ".join(parts) + f" (source: {pub.source}{comparable})"


def profile_lines(task: TaskSpec) -> list[str]:
    """One block per profile: budget, resources, baseline and reference scores."""
    lines: list[str] = []
    for name in task.profile_names:
        spec = task.with_profile(name)
        profile = task.profiles[name]
        default = " (default)" if name == task.default_profile_name else ""
        lines.append(f"profile {name}{default}: {profile.description}".rstrip(": "))
        if profile.unavailable:
            lines.append(f"    cannot run in rgym yet: {profile.unavailable.strip()}")
        lines.append(f"    budget: {_budget_text(spec.budget)}")
        lines.append(f"    resources: {_resources_text(spec.resources)}")
        if spec.baseline is not None:
            command = f" (command: {spec.baseline.command})" if spec.baseline.command else ""
            lines.append(f"    baseline: {baseline_text(spec)}{command}")
        published = published_text(spec)
        if published:
            lines.append(f"    published: {published}")
        if spec.reference_scores:
            lines.append(f"    reference: {_scores_text(spec.reference_scores)}")
        if profile.prompt is not None or profile.prompt_file is not None:
            where = f" (from {profile.prompt_file})" if profile.prompt_file else ""
            lines.append(f"    prompt: its own task statement{where}, {len(spec.description):,} characters")
        if profile.tool_config:
            lines.append("    tools: " + "; ".join(
                f"{ns}: " + ", ".join(f"{k}={v}" for k, v in cfg.items())
                for ns, cfg in profile.tool_config.items()))
        if profile.datasets is not None:
            lines.append("    datasets: " + (", ".join(
                f"{d.id} -> {d.mount}/" + (" (starter files)" if getattr(d, "starter", False) else "")
                for d in spec.datasets) or "none"))
        if getattr(profile, "subtasks", None) is not None:
            lines.append("    sub-tasks: " + (subtasks_text(spec.subtasks) or "none"))
        if profile.grader is not None:
            lines.append(f"    grader: timeout_s={spec.grader.timeout_s:g} location={spec.grader.location}")
        if spec.env:
            lines.append("    env: " + " ".join(f"{k}={v}" for k, v in sorted(spec.env.items())))
    return lines


def show_run_dir(path: Path, as_json: bool) -> None:
    """``rgym show RUN_DIR``: the run viewer's summary when it is installed
    (``rgym_core.runs_cli.show_run``), else the run's identity, state and scores."""
    show_run: Callable[..., None] | None
    try:
        from rgym_core.runs_cli import show_run
    except ImportError:
        show_run = None
    if show_run is not None:
        show_run(path, as_json=as_json)
        return
    from rgym_core.rundir import RunDir, RunDirError

    run = RunDir(path)
    try:
        data: dict[str, Any] = {"run_dir": str(path), "state": str(run.state()), **run.identity()}
        if run.result_path.is_file():
            result = run.result()
            data.update(status=str(result.status), final_scores=result.final_scores, steps=result.steps,
                        duration_s=result.duration_s)
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        if value is not None:
            click.echo(f"{key}: {value}")


def sandbox_limits(registry: Registry, spec: TaskSpec) -> dict[str, dict[str, str]]:
    """What each installed sandbox backend would enforce for the task's (resolved)
    resources with no ``--sandbox-option``: ``{backend: {limit: text}}`` (memory,
    processes, workspace, cpus...).  A backend that does not describe its limits
    gets ``{}``; one whose description fails gets ``{"error": ...}``."""
    out: dict[str, dict[str, str]] = {}
    try:
        table = registry.sandboxes
    except RegistryError as exc:
        return {"?": {"error": str(exc)}}
    for name in sorted(table):
        describe = getattr(table[name].item, "limits", None)
        if describe is None:
            out[name] = {}
            continue
        try:
            out[name] = {str(k): str(v) for k, v in dict(describe(spec.resources, {})).items()}
        except Exception as exc:  # noqa: BLE001 - a plugin's bug must not break `rgym show`
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def limits_lines(limits: dict[str, dict[str, str]], profile: str | None = None) -> list[str]:
    """``limits per sandbox:`` and one line per backend."""
    if not limits:
        return []
    which = f"profile {profile}, " if profile else ""
    lines = [f"limits per sandbox ({which}no --sandbox-option):"]
    for name, items in limits.items():
        text = "; ".join(f"{k} {v}" for k, v in items.items()) if items else \
            "not described by the backend"
        lines.append(f"  {name}: {text}")
    return lines


def bubblewrap_facts() -> dict[str, Any]:
    """Which bwrap the local sandbox and confined grading use here (``path``,
    ``source``: ``system``/``bundled``/``RGYM_BWRAP``, ``version``) and, when it
    cannot run, ``problem``."""
    from rgym_core.isolation import bwrap_info, bwrap_problem

    info = bwrap_info()
    facts: dict[str, Any] = ({"path": info.path, "source": info.source, "version": info.version}
                             if info else {"path": None, "source": None, "version": None})
    facts["problem"] = bwrap_problem()
    return facts


def bubblewrap_line(facts: Mapping[str, Any]) -> str:
    """One line, e.g. ``bubblewrap: bundled bwrap 0.11.0 (/.../bwrap)``."""
    if facts["path"] is None:
        return f"bubblewrap: none ({facts['problem']})"
    text = (f"bubblewrap: {facts['source']} bwrap {facts['version'] or '(version unknown)'} "
            f"({facts['path']})")
    return text + (f"; unusable here: {facts['problem']}" if facts["problem"] else "")


@click.command("show")
@click.argument("task")
@click.option("--profile", default=None, help="Show the task as this profile configures it.")
@click.option("--json", "as_json", is_flag=True, help="Print the task spec as JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, task: str, profile: str | None, as_json: bool) -> None:
    """Show a task: description, metrics, baseline, datasets, budget, profiles.

    TASK may also be a run directory: its task, agent, state and scores are shown.
    """
    if Path(task).is_dir():
        from rgym_core.rundir import is_run_dir

        if is_run_dir(task):
            show_run_dir(Path(task), as_json)
            return
    registry = get_registry(ctx)
    try:
        reg = registry.resolve("tasks", task)
        spec: TaskSpec = reg.item if profile is None else reg.item.with_profile(profile)
    except (RegistryError, SpecError) as exc:
        raise click.UsageError(str(exc)) from None
    # What a run gets: the asked profile, else the task's default one (rgym run's choice).
    resolved = spec if spec.profile is not None else spec.with_profile(None)
    limits = sandbox_limits(registry, resolved)
    if as_json:
        data = unstructure(spec)
        data["distribution"] = reg.distribution
        data["sandbox_limits"] = limits
        data["sandbox_limits_profile"] = resolved.profile
        data["bubblewrap"] = bubblewrap_facts()
        data["divergences"] = divergence_link(spec)
        click.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    title = f" [dim]profile {spec.profile}[/dim]" if spec.profile else ""
    console.print(f"[bold]{spec.id}[/bold]  {escape(spec.name)}  [dim](from {reg.distribution})[/dim]{title}")
    console.print(Markdown(spec.description))
    table = Table("metric", "direction", "primary", "baseline", "reference")
    for m in spec.metrics:
        table.add_row(m.name, m.direction, "yes" if m is spec.primary_metric else "",
                      _number(spec.baseline_scores.get(m.name)), _number(spec.reference_scores.get(m.name)))
    console.print(table)
    console.print(f"budget: {_budget_text(spec.budget)}", highlight=False)
    console.print(f"resources: {_resources_text(spec.resources)}", highlight=False)
    for line in limits_lines(limits, resolved.profile):
        console.print(escape(line), highlight=False, soft_wrap=True)
    console.print(escape(bubblewrap_line(bubblewrap_facts())), highlight=False, soft_wrap=True)
    if spec.datasets:
        console.print("datasets: " + ", ".join(f"{d.id} -> {d.mount}/" for d in spec.datasets),
                      highlight=False)
    if spec.baseline and spec.baseline.command:
        console.print(f"baseline command: {escape(spec.baseline.command)}", highlight=False)
    if spec.profile is not None or not spec.profiles:
        console.print(escape(f"baseline (recorded): {baseline_text(spec)}"), highlight=False,
                      soft_wrap=True)
        published = published_text(spec)
        if published:
            console.print(escape(f"published (the original's figures): {published}"), highlight=False,
                          soft_wrap=True)
    link = divergence_link(spec)
    if link is not None or spec.published.baseline or spec.published.reference:
        console.print(escape(f"divergences from the original: {link or 'docs/divergences.md in rgym'}"),
                      highlight=False, soft_wrap=True)
    if spec.subtasks:
        console.print(escape("sub-tasks: " + subtasks_text(spec.subtasks)), highlight=False,
                      soft_wrap=True)
    if spec.profiles and profile is None:
        console.print("")
        for line in profile_lines(spec):
            console.print(escape(line), highlight=False, soft_wrap=True)
        console.print(f"[dim]rgym run {spec.id} --profile NAME picks one[/dim]")

"""The ``rgym`` command line.

Exit codes: 0 the command succeeded (for ``run``: the episode was graded with a
valid score); 1 the episode ended without a valid score (evaluation error,
missing submission, rgym error) or a check failed; 2 bad usage or an invalid
file or name; 130 the episode was cancelled (SIGINT/SIGTERM).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from rgym_core import __version__
from rgym_core.registry import KINDS, Registry, RegistryError, load_registry
from rgym_core.serialization import SpecError, unstructure

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
#: Commands that plugins of this repository add, for a helpful message when missing.
PLUGIN_COMMANDS = {"image": ("rgym-sandbox-docker", "plugins/sandbox-docker"),
                   "sandbox": ("rgym-sandbox-docker", "plugins/sandbox-docker")}
LIST_KINDS = {"tasks": "tasks", "datasets": "datasets", "agents": "agents", "tools": "tools",
              "sandboxes": "sandboxes", "models": "model_providers", "plugins": "plugins"}


def _split_csv(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def get_registry(ctx: click.Context) -> Registry:
    """The registry for this invocation, built once with the plugin filters."""
    root = ctx.find_root()
    root.ensure_object(dict)
    obj = root.obj
    if "registry" not in obj:
        params = root.params
        only = _split_csv(params.get("plugins") or ()) or None
        disabled = _split_csv(params.get("disabled") or ()) or None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                obj["registry"] = load_registry(only=only, disabled=disabled)
            except RegistryError as exc:
                raise click.ClickException(str(exc)) from None
        for w in caught:
            click.echo(f"warning: {w.message}", err=True)
    return obj["registry"]


class RgymGroup(click.Group):
    """A group that also offers the commands plugins add (``rgym_cli_commands``)."""

    def _plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        cache = getattr(self, "_plugin_cache", None)
        if cache is None:
            try:
                registry = get_registry(ctx)
                cache = {c.name: c for c in registry.cli_commands() if c.name}
            except click.ClickException:
                cache = {}
            self._plugin_cache = cache
        return cache

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._plugin_commands(ctx).get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name in PLUGIN_COMMANDS and self.get_command(ctx, name) is None:
            dist, folder = PLUGIN_COMMANDS[name]
            raise click.UsageError(f"'rgym {name}' comes with the {dist} pack: pip install {dist} "
                                   f"(or ./{folder} in a checkout)", ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=RgymGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "RGYM"})
@click.version_option(__version__, prog_name="rgym")
@click.option("--plugins", "plugins", multiple=True, metavar="NAMES",
              help="Load only these plugins (entry-point or distribution names, comma-separated; "
                   "env RGYM_PLUGINS). The built-in plugin always loads.")
@click.option("--disable-plugin", "disabled", multiple=True, metavar="NAME",
              help="Do not load this plugin (repeatable; env RGYM_DISABLE_PLUGINS).")
@click.pass_context
def cli(ctx: click.Context, plugins: tuple[str, ...], disabled: tuple[str, ...]) -> None:
    """rgym: run AI research agents on ML research tasks, and score them."""
    ctx.ensure_object(dict)


# --------------------------------------------------------------------------- list / show


def _rows(registry: Registry, kind: str) -> list[dict[str, Any]]:
    if kind == "plugins":
        return [{"name": p.name, "distribution": p.distribution, "version": p.version,
                 "loaded": p.loaded, "error": p.error} for p in registry.plugins]
    rows = []
    for name, reg in sorted(registry.table(LIST_KINDS[kind]).items()):
        item = reg.item
        desc = getattr(item, "description", "") or getattr(getattr(item, "schema", None), "description", "")
        row = {"name": name, "distribution": reg.distribution, "description": " ".join(str(desc).split())}
        if kind == "tasks":
            row["title"] = item.name
            row["primary_metric"] = f"{item.primary_metric.name} ({item.primary_metric.direction})"
        if kind == "tools":
            row["default"] = item.default
        rows.append(row)
    return rows


@cli.command("list")
@click.argument("kind", type=click.Choice(sorted(LIST_KINDS)), default="tasks")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def list_cmd(ctx: click.Context, kind: str, as_json: bool) -> None:
    """List installed tasks, agents, tools, sandboxes, datasets, models or plugins."""
    rows = _rows(get_registry(ctx), kind)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"rgym {kind}", show_lines=False)
    columns = list(rows[0]) if rows else ["name", "distribution"]
    if kind == "tasks":
        columns = ["name", "title", "primary_metric", "distribution"]
    elif kind != "plugins":
        columns = [c for c in columns if c != "description"] + ["description"]
    for col in columns:
        keep_whole = col in ("name", "distribution", "version", "loaded", "default")
        table.add_column(col.replace("_", " "), overflow="fold", no_wrap=keep_whole)
    for row in rows:
        table.add_row(*[_cell(row.get(c)) for c in columns])
    Console().print(table)
    if not rows:
        click.echo(f"No {kind} installed. Install a pack, e.g. pip install ./task-packs/gametheory")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    return text if len(text) <= 90 else text[:87] + "..."


@cli.command("show")
@click.argument("task")
@click.option("--json", "as_json", is_flag=True, help="Print the task spec as JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, task: str, as_json: bool) -> None:
    """Show a task: description, metrics, baseline, datasets, budget."""
    registry = get_registry(ctx)
    try:
        reg = registry.resolve("tasks", task)
    except RegistryError as exc:
        raise click.UsageError(str(exc)) from None
    spec = reg.item
    data = unstructure(spec)
    data["distribution"] = reg.distribution
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{spec.id}[/bold]  {spec.name}  [dim](from {reg.distribution})[/dim]")
    console.print(Markdown(spec.description))
    table = Table("metric", "direction", "primary", "baseline", "reference")
    for m in spec.metrics:
        table.add_row(m.name, m.direction, "yes" if m is spec.primary_metric else "",
                      _number(spec.baseline_scores.get(m.name)), _number(spec.reference_scores.get(m.name)))
    console.print(table)
    b = spec.budget
    console.print(f"budget: max_steps={b.max_steps} time_limit_s={b.time_limit_s} "
                  f"action_timeout_s={b.action_timeout_s} cost_limit_usd={b.cost_limit_usd}")
    if spec.datasets:
        console.print("datasets: " + ", ".join(f"{d.id} -> {d.mount}/" for d in spec.datasets))
    if spec.baseline and spec.baseline.command:
        console.print(f"baseline command: {spec.baseline.command}")
    if spec.subtasks:
        console.print("sub-tasks: " + ", ".join(s.id for s in spec.subtasks))


# --------------------------------------------------------------------------- run


def _parse_pairs(values: tuple[str, ...], option: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


@cli.command("run")
@click.argument("task")
@click.option("--agent", "-a", default="scripted", show_default=True, help="Agent (short or full name).")
@click.option("--model", "-m", default=None, help="Model as provider/name (for LLM agents).")
@click.option("--base-url", default=None, help="Model endpoint, as OpenAI clients take it (ending in /v1).")
@click.option("--sandbox", "-s", default="local", show_default=True, help="Sandbox backend.")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Step budget.")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Wall-clock budget in seconds.")
@click.option("--action-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Timeout of one action in seconds.")
@click.option("--cost-limit", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Model cost budget in USD (enforced before each call).")
@click.option("--token-limit", type=click.IntRange(min=1), default=None, help="Token budget.")
@click.option("--seed", type=int, default=None, help="Seed passed to the agent.")
@click.option("--grader-seed", type=int, default=None, help="Seed passed to the grader (RGYM_SEED).")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("runs"),
              show_default=True, help="Where run directories are written.")
@click.option("--tool", "tools", multiple=True, help="Enable a tool or a tool pack (repeatable).")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the agent (repeatable; values parsed as JSON when possible).")
@click.option("--sandbox-option", "sandbox_options", multiple=True, metavar="KEY=VALUE",
              help="Option passed to the sandbox backend (repeatable).")
@click.option("--dataset", "datasets", multiple=True, metavar="MOUNT=DATASET",
              help="Run on another registered dataset of the same form.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              envvar="RGYM_DATA_DIR", help="Folder with one sub-folder per dataset (env RGYM_DATA_DIR).")
@click.option("--network/--no-network", default=None, help="Allow the sandbox network (default: the task's).")
@click.option("--gpus", default=None, help="GPUs for the sandbox (docker: 'all' or a count).")
@click.option("--image", default=None, help="Container image (docker backend).")
@click.option("--memory", "memory_mb", type=click.IntRange(min=16), default=None, help="Memory limit in MB.")
@click.option("--cpus", type=click.FloatRange(min=0, min_open=True), default=None, help="CPU limit.")
@click.option("--pids", type=click.IntRange(min=8), default=None, help="Process-count limit.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag recorded in the result.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON, no progress line.")
@click.option("--quiet", "-q", is_flag=True, help="No progress line.")
@click.pass_context
def run_cmd(ctx: click.Context, task: str, tools: tuple[str, ...], agent_options: tuple[str, ...],
            sandbox_options: tuple[str, ...], datasets: tuple[str, ...], tags: tuple[str, ...],
            as_json: bool, quiet: bool, **kwargs: Any) -> None:
    """Run one episode of TASK with an agent and print its score and run directory."""
    from rgym_core.runner import RunConfig, RunError, run_episode

    registry = get_registry(ctx)
    config = RunConfig(
        task=task, agent=kwargs["agent"], model=kwargs["model"], base_url=kwargs["base_url"],
        sandbox=kwargs["sandbox"], max_steps=kwargs["max_steps"], time_limit_s=kwargs["time_limit"],
        action_timeout_s=kwargs["action_timeout"], cost_limit_usd=kwargs["cost_limit"],
        token_limit=kwargs["token_limit"], seed=kwargs["seed"], grader_seed=kwargs["grader_seed"],
        runs_dir=kwargs["runs_dir"], agent_options=_parse_pairs(agent_options, "--agent-option"),
        tools=_split_csv(tools), datasets={k: str(v) for k, v in _parse_pairs(datasets, "--dataset").items()},
        data_dir=kwargs["data_dir"], network=kwargs["network"], gpus=kwargs["gpus"], image=kwargs["image"],
        memory_mb=kwargs["memory_mb"], cpus=kwargs["cpus"], pids=kwargs["pids"],
        sandbox_options=_parse_pairs(sandbox_options, "--sandbox-option"),
        tags={k: str(v) for k, v in _parse_pairs(tags, "--tag").items()})
    from rgym_core.progress import EpisodeProgress

    progress = EpisodeProgress(enabled=not (as_json or quiet))
    try:
        with progress:
            result = run_episode(config, registry, progress=progress.update)
    except (RunError, RegistryError, SpecError) as exc:
        if as_json:
            click.echo(json.dumps({"error": str(exc), "status": None}))
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        click.echo(json.dumps(unstructure(result), indent=2, default=str))
    else:
        progress.summary(result, registry.task(result.task_id))
    if result.status.value == "cancelled":
        sys.exit(EXIT_CANCELLED)
    sys.exit(EXIT_OK if result.final_scores is not None else EXIT_FAILED)


# --------------------------------------------------------------------------- check-pack


@cli.command("check-pack")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check_pack_cmd(path: Path, as_json: bool) -> None:
    """Check a pack folder (or one task folder): specs load, files exist, graders import."""
    from rgym_core.checks import check_pack

    report = check_pack(path)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        report.print()
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


def _add_core_commands() -> None:
    try:
        from rgym_core.scoring.cli import score
    except ImportError:  # the scoring package is optional while it is being built
        return
    cli.add_command(score, "score")


_add_core_commands()


def _show_warning(message: Any, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Warnings as one line, without the source line Python prints by default."""
    text = str(message)
    click.echo(text if text.startswith(("rgym", "warning")) else f"warning: {text}", err=True)


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = _show_warning
    try:
        cli(prog_name="rgym")
    except SpecError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":  # `python -m rgym_core.cli`
    main()


__all__ = ["cli", "main", "KINDS"]

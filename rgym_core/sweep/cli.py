"""``rgym sweep``: run a matrix of episodes in parallel, resume it, score it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rgym_core.cli import EXIT_USAGE, _split_csv, get_registry, output_folder_problem
from rgym_core.commands.run import config_values, parse_pairs, run_cmd, set_prices

#: ``rgym run`` parameters that are axes or per-cell in a sweep (not shared as is), and
#: ``--resume`` (a sweep resumes from its folder).  ``--price`` is shared but is not a
#: RunConfig field: it sets RGYM_PRICE here, which the local executor's cells read and
#: :func:`~rgym_core.sweep.worker.job_payload` sends to the other executors' workers.
_NOT_SHARED = {"task", "agent", "model", "profile", "seed", "runs_dir", "as_json", "quiet", "resume"}


def shared_run_params() -> list[click.Parameter]:
    """``rgym run``'s own option objects, minus the axes: one definition for both commands."""
    return [p for p in run_cmd.params if p.name not in _NOT_SHARED]


def run_values(ctx: click.Context, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The shared options the user gave on the command line, as RunConfig fields."""
    from click.core import ParameterSource

    given: dict[str, Any] = {}
    for param in shared_run_params():
        name = param.name
        assert name is not None
        if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None):
            continue
        given[name] = kwargs.get(name)
    out: dict[str, Any] = {}
    for field, value in config_values(given).items():  # rgym run's own mapping
        if isinstance(value, Path):
            value = str(value)
        if value in (None, (), [], {}):
            continue
        out[field] = value
    return out


def _sweep_params(func: Any) -> Any:
    for param in reversed(shared_run_params()):
        func.__click_params__ = [*getattr(func, "__click_params__", []), param]
    return func


@click.command("sweep")
@click.argument("tasks", nargs=-1)
@click.option("--file", "-f", "spec_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A YAML file with the matrix and options (the command line wins).")
@click.option("--agent", "-a", "agents", multiple=True,
              help="Agent(s) (repeatable or comma-separated; default: scripted).")
@click.option("--model", "-m", "models", multiple=True,
              help="Model(s) as provider/name, for the agents that take one (repeatable).")
@click.option("--profile", "-p", "profiles", multiple=True,
              help="Task profile(s) (repeatable; default: each task's own).")
@click.option("--seeds", help="Seeds: 1-3,7 (each cell passes its seed to the agent and, unless "
                              "--grader-seed is given, to the grader).")
@click.option("--repeats", "--epochs", type=click.IntRange(min=1),
              help="Episodes per cell of the matrix (default 1).")
@click.option("--exclude", multiple=True, metavar="PATTERN",
              help="Leave out tasks matching this name or glob (repeatable).")
@click.option("--sweep-dir", "-o", type=click.Path(path_type=Path),  # checked below, in one line
              help="The sweep folder (default: sweeps/<name>, or sweeps/sweep-<hash of the matrix>). "
                   "Alone, it resumes the sweep its manifest describes.")
@click.option("--name", help="The sweep's name (its default folder).")
@click.option("--max-parallel", "-j", type=click.IntRange(min=1),
              help="Episodes at once (default 4).")
@click.option("--max-connections", type=click.IntRange(min=1),
              help="Concurrent requests per model (default: no limit).")
@click.option("--retry-errors", type=click.IntRange(min=0),
              help="Run a cell again this many times when the infrastructure ended it "
                   "(error, sandbox failure, killed) (default 1).")
@click.option("--executor", "-x", help="local (default), or one a pack registers (ray, slurm: `rgym list plugins`).")
@click.option("--address", help="The Ray cluster to join (ray executor), e.g. 127.0.0.1:6379 or auto.")
@click.option("--executor-option", "executor_options", multiple=True, metavar="KEY=VALUE",
              help="An option of the executor (slurm: partition=, gpu_partition=, account=...).")
@click.option("--dry-run", is_flag=True, help="List the cells and their states; run nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print events as JSON lines on stdout (the summary last), no table.")
@click.option("--quiet", "-q", is_flag=True, help="No table, no progress lines: the summary only.")
@_sweep_params
@click.pass_context
def sweep(ctx: click.Context, tasks: tuple[str, ...], spec_file: Path | None, agents: tuple[str, ...],
          models: tuple[str, ...], profiles: tuple[str, ...], seeds: str | None, repeats: int | None,
          exclude: tuple[str, ...], sweep_dir: Path | None, name: str | None, max_parallel: int | None,
          max_connections: int | None, retry_errors: int | None, executor: str | None,
          address: str | None, executor_options: tuple[str, ...], dry_run: bool, as_json: bool,
          quiet: bool, **kwargs: Any) -> None:
    """Run a matrix of tasks x agents x models x seeds in parallel, resume it, and score it.

    TASKS are task names or globs ('mlgym/*'). The sweep folder holds a manifest
    (sweep.json) and one run directory per episode, named after its cell
    (<task>/<agent>[__<model>]/seed-<n>). Running the same command again skips
    finished episodes, runs again those that never finished, and retries those the
    infrastructure ended; at the end it prints `rgym score SWEEP_DIR`'s summary.
    """
    from rgym_core.sweep.matrix import SWEEP_SETTINGS, SweepError, SweepSpec, parse_seeds

    _set_prices(tuple(kwargs.pop("prices", None) or ()), as_json)
    try:
        settings: dict[str, Any] = {}
        base = SweepSpec()
        if spec_file is not None:
            data = _read_yaml(spec_file)
            settings = {k: data.pop(k) for k in SWEEP_SETTINGS if k in data}
            base = SweepSpec.from_data(data, where=str(spec_file))
        run = {**base.run, **run_values(ctx, kwargs)}
        where = "--sweep-dir"
        if sweep_dir is None and settings.get("sweep_dir"):
            sweep_dir = Path(str(settings["sweep_dir"]))
            where = f"{spec_file}: sweep_dir"
            if spec_file is not None and not sweep_dir.is_absolute():
                sweep_dir = spec_file.parent / sweep_dir
        if sweep_dir is not None:
            _check_output_folder(sweep_dir, where, as_json)
        resume_only = not tasks and spec_file is None and sweep_dir is not None
        if resume_only and sweep_dir is not None:  # a bare `rgym sweep -o DIR`: the manifest's settings
            from rgym_core.sweep.folder import SweepFolder

            manifest = SweepFolder(sweep_dir).read_manifest() or {}
            settings = {k: v for k, v in dict(manifest.get("settings") or {}).items() if v is not None}
        spec = SweepSpec(tasks=list(tasks) or base.tasks,
                         agents=_split_csv(agents) or base.agents,
                         models=_split_csv(models) or base.models,
                         seeds=parse_seeds(seeds) if seeds is not None else base.seeds,
                         repeats=repeats or base.repeats,
                         profiles=_split_csv(profiles) or base.profiles,
                         exclude=list(exclude) or base.exclude, run=run, name=name or base.name)
    except SweepError as exc:
        raise click.UsageError(str(exc)) from None
    if sweep_dir is None:  # sweeps/<name>: the folder `sweeps` may be created, its parent must be usable
        from rgym_core.sweep.engine import sweep_dir_default

        _check_output_folder(sweep_dir_default(spec).parent, "the default sweep folder", as_json)
    limit = max_connections or settings.get("max_connections")
    registry = get_registry(ctx)
    from rgym_core.sweep.session import SweepSession

    session = SweepSession(
        registry=registry, spec=spec, sweep_dir=sweep_dir, resume_only=resume_only,
        max_parallel=max_parallel or int(settings.get("max_parallel", 4)),
        max_connections=int(limit) if limit else None,
        retry_errors=retry_errors if retry_errors is not None else int(settings.get("retry_errors", 1)),
        executor=executor or str(settings.get("executor", "local")),
        executor_options={**dict(settings.get("executor_options") or {}),
                          **parse_pairs(executor_options, "--executor-option")},
        address=address or settings.get("address"))
    try:
        code = session.run(as_json=as_json, quiet=quiet, dry_run=dry_run,
                           print_summary=lambda path: _print_summary(ctx, path, as_json))
    except SweepError as exc:
        if as_json:
            click.echo(json.dumps({"event": "error", "error": str(exc)}))
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code)


def _set_prices(prices: tuple[str, ...], as_json: bool) -> None:
    """Apply ``--price`` as ``rgym run`` does (over RGYM_PRICE), or exit 2 with one line."""
    if not prices:
        return
    try:
        set_prices(prices)
    except ValueError as exc:
        if as_json:
            click.echo(json.dumps({"event": "error", "error": str(exc)}))
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


def _check_output_folder(path: Path, option: str, as_json: bool) -> None:
    """Exit 2 with one line when the sweep folder cannot be written (see
    :func:`~rgym_core.cli.output_folder_problem`)."""
    problem = output_folder_problem(path, option)
    if problem is None:
        return
    if as_json:
        click.echo(json.dumps({"event": "error", "error": problem}))
    click.echo(f"error: {problem}", err=True)
    sys.exit(EXIT_USAGE)


def _read_yaml(path: Path) -> dict[str, Any]:
    from rgym_core.sweep.matrix import SweepError

    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - yaml's errors name the line
        raise SweepError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: expected a mapping (tasks:, agents:, seeds:, ...)")
    return data


def _print_summary(ctx: click.Context, path: Path, as_json: bool) -> None:
    """``rgym score SWEEP_DIR``'s output (as the last JSON event with --json)."""
    from rgym_core.scoring.cli import score

    if as_json:
        from rgym_core.scoring import api

        report = api.score_runs([path])
        click.echo(json.dumps({"event": "summary", "sweep_dir": str(path), "score": report.to_data()},
                              default=str))
        return
    try:
        ctx.invoke(score, run_dirs=(path,))
    except SystemExit as exc:  # score exits 2 on bad input; keep the sweep's own exit code
        if exc.code not in (0, None):
            click.echo(f"warning: rgym score {path} failed", err=True)

"""``rgym run TASK``: one episode, its score and its run directory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import attrs
import click

from rgym_core.cli import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    _split_csv,
    get_registry,
    output_folder_problem,
)
from rgym_core.registry import RegistryError
from rgym_core.serialization import SpecError, unstructure


def _parse_pairs(values: tuple[str, ...], option: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        if key in out:
            raise click.BadParameter(f"'{key}' is given twice", param_hint=option)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


#: ``KEY=VALUE`` pairs -> dict (values parsed as JSON when they parse), for commands
#: with options of that form (``rgym sweep --executor-option``).
parse_pairs = _parse_pairs


def _once(ctx: click.Context, param: click.Parameter, values: tuple[Any, ...]) -> Any:
    """The value of an option that may be given once (repeating it is an error,
    not "the last one wins")."""
    if len(values) > 1:
        shown = ", ".join(str(v) for v in values)
        raise click.BadParameter(f"given {len(values)} times ({shown}); give it once",
                                 param_hint=f"'{param.opts[0]}'")
    return values[0] if values else None


def once(*decls: str, default: Any = None, **kwargs: Any) -> Any:
    """``click.option`` for a value that may be given once."""
    if default is not None:
        kwargs["default"] = (default,)
        kwargs.setdefault("show_default", True)
    return click.option(*decls, multiple=True, callback=_once, **kwargs)


#: ``rgym run`` option names -> :class:`~rgym_core.runner.RunConfig` fields where they differ.
OPTION_FIELDS = {"time_limit": "time_limit_s", "action_timeout": "action_timeout_s",
                 "training_timeout": "training_timeout_s", "cost_limit": "cost_limit_usd"}
_PAIR_OPTIONS = {"agent_options": "--agent-option", "sandbox_options": "--sandbox-option",
                 "tool_options": "--tool-option",
                 "datasets": "--dataset", "tags": "--tag"}

_RUN_OPTIONS = [
    once("--agent", "-a", default="scripted", help="Agent (short or full name)."),
    once("--model", "-m", help="Model as provider/name (for LLM agents)."),
    once("--base-url", help="Model endpoint, as OpenAI clients take it (ending in /v1)."),
    once("--profile", "-p", help="Task profile (`rgym show TASK` lists them; default: the task's)."),
    once("--sandbox", "-s", default="local", help="Sandbox backend."),
    once("--agent-isolation", type=click.Choice(["none", "process"]), default="none",
         help="none: the scaffold runs inside rgym (trusted code); process: in its own confined "
              "process, with model calls made by rgym (untrusted scaffolds)."),
    once("--max-steps", type=click.IntRange(min=1), help="Step budget."),
    once("--time-limit", type=click.FloatRange(min=0, min_open=True), help="Wall-clock budget in seconds."),
    once("--action-timeout", type=click.FloatRange(min=0, min_open=True),
         help="Timeout of one action in seconds."),
    once("--training-timeout", type=click.FloatRange(min=0, min_open=True),
         help="Timeout in seconds of a training command (a shell command naming python, "
              "python3, torchrun, accelerate or deepspeed, as MLGym decides; default: the "
              "task's, else --action-timeout)."),
    once("--cost-limit", type=click.FloatRange(min=0, min_open=True),
         help="Model cost budget in USD (enforced before each call)."),
    once("--token-limit", type=click.IntRange(min=1), help="Token budget."),
    once("--seed", type=int, help="Seed passed to the agent."),
    once("--grader-seed", type=int, help="Seed passed to the grader (RGYM_SEED)."),
    # Checked by `output_folder_problem` (one line), not by click (a usage block).
    once("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"),
         help="Where run directories are written."),
    click.option("--tool", "tools", multiple=True, help="Enable a tool or a tool pack (repeatable)."),
    click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
                 help="Option passed to the agent (repeatable; values parsed as JSON when possible)."),
    click.option("--sandbox-option", "sandbox_options", multiple=True, metavar="KEY=VALUE",
                 help="Option passed to the sandbox backend (repeatable)."),
    click.option("--tool-option", "tool_options", multiple=True, metavar="KEY=VALUE",
                 help="Tool setting over the task's and profile's tool_config (repeatable): "
                      "window=1000, search=basic|extended|fixed, lint=mlgym; NAMESPACE.KEY for "
                      "another pack's tools."),
    click.option("--dataset", "datasets", multiple=True, metavar="MOUNT=DATASET",
                 help="Run on another registered dataset of the same form."),
    once("--data-dir", type=click.Path(file_okay=False, path_type=Path), envvar="RGYM_DATA_DIR",
         help="Folder with one sub-folder per dataset (env RGYM_DATA_DIR)."),
    click.option("--network/--no-network", default=None,
                 help="Allow the sandbox network (default: the task's)."),
    once("--gpus", help="GPUs for the sandbox (docker: 'all' or a count)."),
    once("--image", help="Container image (docker backend)."),
    once("--memory", "memory_mb", type=click.IntRange(min=16), help="Memory limit in MB."),
    once("--cpus", type=click.FloatRange(min=0, min_open=True), help="CPU limit."),
    once("--pids", type=click.IntRange(min=8), help="Process-count limit."),
    click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag recorded in the result."),
]


def run_options(func: Any) -> Any:
    """Decorate a click command with every option of ``rgym run`` (all but the TASK
    argument, ``--json`` and ``--quiet``), in ``rgym run``'s order.  Turn the values
    into RunConfig fields with :func:`config_values`."""
    for option in reversed(_RUN_OPTIONS):
        func = option(func)
    return func


def config_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The values of :func:`run_options` (click's keyword arguments; names absent from
    ``kwargs`` are skipped) as :class:`~rgym_core.runner.RunConfig` fields: options
    renamed (:data:`OPTION_FIELDS`), ``KEY=VALUE`` lists parsed (agent/sandbox options
    as JSON where they parse; datasets and tags as text), ``--tool`` split on commas.
    Raises ``click.BadParameter`` for a malformed pair."""
    out: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in _PAIR_OPTIONS:
            pairs = _parse_pairs(tuple(value or ()), _PAIR_OPTIONS[name])
            value = pairs if name in ("agent_options", "sandbox_options", "tool_options") else \
                {k: str(v) for k, v in pairs.items()}
        elif name == "tools":
            value = _split_csv(tuple(value or ()))
        elif name not in OPTION_NAMES:
            continue
        out[OPTION_FIELDS.get(name, name)] = value
    return out


#: What ``--price`` sets for the model providers (``rgym_llm.prices`` reads it):
#: ``MODEL=IN,OUT`` entries separated by ``;``, USD per million tokens.
PRICE_ENV = "RGYM_PRICE"


def price_entries(values: tuple[str, ...] | list[str]) -> list[str]:
    """``--price MODEL=IN,OUT`` values checked and tidied (``MODEL=IN,OUT``); raises
    ValueError with one line naming the value and the expected form."""
    out = []
    for value in values:
        model, sep, rates = value.partition("=")
        parts = [p.strip() for p in rates.split(",")]
        try:
            if not sep or not model.strip() or ";" in value or len(parts) != 2:
                raise ValueError
            numbers = [float(p) for p in parts]
            if any(n < 0 or n != n or n == float("inf") for n in numbers):
                raise ValueError
        except ValueError:
            raise ValueError(f"--price {value!r}: expected MODEL=IN,OUT in USD per million input "
                             "and output tokens, e.g. --price gpt-4o=2.5,10 (0,0 for a free local "
                             "model)") from None
        out.append(f"{model.strip()}={numbers[0]:g},{numbers[1]:g}")
    return out


class _TaskArgument(click.Argument):
    """TASK: shown (and reported missing) as required, but left out with ``--resume``."""

    def make_metavar(self, *args: Any, **kwargs: Any) -> str:
        return "TASK"


@click.command("run")
@click.argument("task", required=False, cls=_TaskArgument)
@run_options
@click.option("--price", "prices", multiple=True, metavar="MODEL=IN,OUT",
              help="Price of a model in USD per million input and output tokens, over the "
                   "built-in table and RGYM_PRICES (repeatable; 0,0 for a free local model).")
@click.option("--resume", "resume", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="Continue the killed or cancelled episode of RUN_DIR with the settings it "
                   "recorded: its workspace, spent budget and agent state (TASK may be left out).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON, no progress line.")
@click.option("--quiet", "-q", is_flag=True, help="No progress line.")
@click.pass_context
def run_cmd(ctx: click.Context, task: str | None, as_json: bool, quiet: bool,
            prices: tuple[str, ...], resume: Path | None, **kwargs: Any) -> None:
    """Run one episode of TASK with an agent and print its score and run directory."""
    from rgym_core.runner import RunConfig, RunError, run_episode

    if task is None and resume is None:
        param = next(p for p in ctx.command.params if p.name == "task")
        raise click.MissingParameter(ctx=ctx, param=param)
    if resume is not None:
        _resume(ctx, resume, task, as_json, quiet, prices, kwargs)
        return
    problem = output_folder_problem(kwargs["runs_dir"], "--runs-dir")
    if problem is not None:
        _usage_failure(problem, as_json)
    if prices:
        _set_prices(prices, as_json)
    registry = get_registry(ctx)
    values: dict[str, Any] = {"task": task, **config_values(kwargs)}
    if values.get("agent_isolation") == "none":
        values.pop("agent_isolation")
    if values.get("profile") is None:
        values.pop("profile", None)
    elif "profile" not in attrs.fields_dict(RunConfig):
        raise click.UsageError("this version of the runner does not apply task profiles")
    config = RunConfig(**values)
    from rgym_core.progress import EpisodeProgress

    progress = EpisodeProgress(enabled=not (as_json or quiet))
    try:
        with progress:
            result = run_episode(config, registry, progress=progress.update)
    except (RunError, RegistryError, SpecError) as exc:
        _usage_failure(str(exc), as_json)
    _report(result, registry, as_json, progress)


def set_prices(values: tuple[str, ...] | list[str]) -> None:
    """Apply ``--price`` values in this process (after RGYM_PRICE's, so they win); raises
    ValueError as :func:`price_entries` does, setting nothing."""
    entries = price_entries(values)
    earlier = os.environ.get(PRICE_ENV, "").strip()
    os.environ[PRICE_ENV] = ";".join([earlier, *entries] if earlier else entries)


def _set_prices(prices: tuple[str, ...], as_json: bool) -> None:
    """Apply ``--price`` (over RGYM_PRICE) or exit 2 naming the bad value."""
    try:
        set_prices(prices)
    except ValueError as exc:
        _usage_failure(str(exc), as_json)


def _resume(ctx: click.Context, run_dir: Path, task: str | None, as_json: bool, quiet: bool,
            prices: tuple[str, ...], kwargs: dict[str, Any]) -> None:
    """``rgym run --resume RUN_DIR``: the recorded settings; an option given that
    contradicts them (another task, agent, profile...) is refused in one line."""
    from click.core import ParameterSource

    from rgym_core.resume import ResumeError, plan_resume, resume_episode
    from rgym_core.runner import RunError

    if prices:
        _set_prices(prices, as_json)
    registry = get_registry(ctx)
    try:
        plan = plan_resume(run_dir, registry)
    except ResumeError as exc:
        _usage_failure(str(exc), as_json)
    recorded = plan.run_config
    config_file = plan.run_dir / "config.json"
    if task is not None and task != recorded.task:
        _usage_failure(f"{config_file}: run.task: the run is of task '{recorded.task}', not "
                       f"'{task}'; drop TASK (a resume keeps the run's settings)", as_json)
    given = {name: value for name, value in kwargs.items()
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE}
    for name, value in config_values(given).items():
        if name == "runs_dir":
            continue  # where new runs go: a resume writes into RUN_DIR
        if getattr(recorded, name, value) != value:
            option = "--" + next((o for o, f in OPTION_FIELDS.items() if f == name), name) \
                .replace("_", "-")
            _usage_failure(f"{config_file}: run.{name}: the run used {getattr(recorded, name)!r}, "
                           f"not {value!r}; drop {option} (a resume keeps the run's settings)",
                           as_json)
    from rgym_core.progress import EpisodeProgress

    progress = EpisodeProgress(enabled=not (as_json or quiet))
    try:
        with progress:
            result = resume_episode(plan.run_dir, registry, progress=progress.update)
    except (RunError, RegistryError, SpecError) as exc:
        _usage_failure(str(exc), as_json)
    _report(result, registry, as_json, progress)


def _report(result: Any, registry: Any, as_json: bool, progress: Any) -> NoReturn:
    """Print the result (JSON or the summary) and exit with its code."""
    if as_json:
        click.echo(json.dumps(unstructure(result), indent=2, default=str))
    else:
        progress.summary(result, registry.task(result.task_id))
    if result.status.value in ("cancelled", "ungraded"):  # a signal stopped the run or its grading
        sys.exit(EXIT_CANCELLED)
    sys.exit(EXIT_OK if result.final_scores is not None else EXIT_FAILED)


def _usage_failure(message: str, as_json: bool) -> NoReturn:
    """Exit 2 with ``error: MESSAGE`` on stderr (and a JSON error on stdout with ``--json``)."""
    if as_json:
        click.echo(json.dumps({"error": message, "status": None}))
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


#: The parameter names :func:`run_options` adds (click's keyword arguments).
OPTION_NAMES = frozenset(p.name for p in run_cmd.params
                         if p.name not in (None, "task", "as_json", "quiet", "prices", "resume"))

__all__ = ["OPTION_FIELDS", "OPTION_NAMES", "PRICE_ENV", "config_values", "once", "parse_pairs",
           "price_entries", "run_cmd", "run_options", "set_prices"]

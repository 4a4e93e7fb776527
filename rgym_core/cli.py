"""The ``rgym`` command line: one click group whose commands all come from plugins.

Every command, the core's included, is registered through the
``rgym_cli_commands`` hook, usually as a :func:`rgym_core.lazy_command`: a name, a line of
help and the ``module:attribute`` of the real command, imported only when that
command runs (or its own ``--help`` is asked for).  ``rgym --help`` therefore
imports no command module, and a command module may import what it needs.

Exit codes: 0 the command succeeded (for ``run``: the episode was graded with a
valid score); 1 the episode ended without a valid score (evaluation error,
missing submission, rgym error) or a check failed; 2 bad usage or an invalid
file or name; 130 the episode was cancelled (SIGINT/SIGTERM).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import click

from rgym_core import __version__
from rgym_core.commands.lazy import LazyCommand
from rgym_core.errors import SpecError
from rgym_core.registry import BUILTIN, Registry, RegistryError, load_registry

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def _split_csv(values: tuple[str, ...] | list[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def output_folder_problem(path: Path, option: str) -> str | None:
    """Why ``path`` cannot receive the folders a command writes (``None`` when it can).

    The folder may be missing (it is created then) but its parent must exist: a typo
    in the parent is caught before anything is written.  Writing is tried for real
    (an unnamed temporary file, which leaves no entry), so a read-only mount, an
    immutable folder or missing permissions are all found, for root too.  The
    answer is one line naming the folder, what is wrong and the fix.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        return f"{option} {target}: is a file, not a folder; pick a folder (or move the file away)"
    folder = target if target.is_dir() else target.parent
    if not folder.exists():
        existing = next((p for p in folder.parents if p.exists()), None)
        if existing is not None and not existing.is_dir():
            return f"{option} {target}: {existing} is a file, not a folder; pick another {option}"
        return (f"{option} {target}: its parent folder {folder} does not exist; create it "
                f"(mkdir -p {folder}) or pick another {option}")
    if not folder.is_dir():
        return f"{option} {target}: {folder} is a file, not a folder; pick another {option}"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return (f"{option} {target}: cannot write in {folder} ({exc.strerror or exc}); pick a folder "
                f"you can write to")
    return None


def get_registry(ctx: click.Context) -> Registry:
    """The registry for this invocation, loaded once with the ``--plugins`` filters.

    Its tables are built on first use: ``rgym --help`` calls no registration hook.
    """
    root = ctx.find_root()
    obj = root.ensure_object(dict)
    if "registry" not in obj:
        params = root.params
        only = _split_csv(params.get("plugins") or ()) or None
        disabled = _split_csv(params.get("disabled") or ()) or None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                obj["registry"] = load_registry(only=only, disabled=disabled, lazy=True)
            except RegistryError as exc:
                raise click.ClickException(str(exc)) from None
        for w in caught:
            click.echo(f"{w.message}" if str(w.message).startswith("rgym") else f"warning: {w.message}",
                       err=True)
    registry: Registry = obj["registry"]
    return registry


class RgymGroup(click.Group):
    """The ``rgym`` group: its commands are those of ``rgym_cli_commands``."""

    def _table(self, ctx: click.Context) -> dict[str, click.Command]:
        obj = ctx.find_root().ensure_object(dict)
        if "commands" not in obj:
            table: dict[str, click.Command] = dict(self.commands)
            owner = {name: "rgym-core" for name in table}
            registry = get_registry(ctx)
            entries = sorted(registry.cli_command_table(), key=lambda r: r.plugin != BUILTIN)
            for reg in entries:
                if not isinstance(reg.item, click.Command) or not reg.name:
                    registry._warn(f"rgym: plugin '{reg.plugin}' from distribution '{reg.distribution}' "
                                   f"returned a CLI command that is not a named click command; skipped")
                    continue
                if reg.name in table:
                    registry._warn(f"rgym: command '{reg.name}' from distribution '{reg.distribution}' "
                                   f"is already provided by '{owner[reg.name]}'; skipped")
                    continue
                table[reg.name] = reg.item
                owner[reg.name] = reg.distribution
            obj["commands"] = table
        commands: dict[str, click.Command] = obj["commands"]
        return commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._table(ctx))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self._table(ctx).get(cmd_name)
        if isinstance(command, LazyCommand):
            return command.load()
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``rgym --help``, without importing any command."""
        rows = []
        limit = formatter.width - 6 - max((len(n) for n in self._table(ctx)), default=0)
        for name, command in sorted(self._table(ctx).items()):
            if command.hidden:
                continue
            rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in self._table(ctx):
            hint = get_registry(ctx).install_hint(f"rgym {name}")
            if hint:
                raise click.UsageError(f"no command '{name}'{hint}", ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=RgymGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "RGYM"})
@click.version_option(__version__, prog_name="rgym")
@click.option("--plugins", "plugins", multiple=True, metavar="NAMES", is_eager=True,
              help="Load only these plugins (entry-point or distribution names, comma-separated; "
                   "env RGYM_PLUGINS). The built-in plugin always loads.")
@click.option("--disable-plugin", "disabled", multiple=True, metavar="NAME", is_eager=True,
              help="Do not load this plugin (repeatable; env RGYM_DISABLE_PLUGINS).")
@click.pass_context
def cli(ctx: click.Context, plugins: tuple[str, ...], disabled: tuple[str, ...]) -> None:
    """rgym: run AI research agents on ML research tasks, and score them."""
    ctx.ensure_object(dict)


def _show_warning(message: Any, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Warnings as one line, without the source line Python prints by default."""
    text = str(message)
    click.echo(text if text.startswith(("rgym", "warning")) else f"warning: {text}", err=True)


def _or_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def usage_error_line(exc: click.UsageError, argv: list[str] | None = None) -> str:
    """click's usage error (an unknown option or command, a missing argument, a bad
    value or choice) as rgym's other errors: one line with what is wrong and the fix.
    ``argv`` names the command when click's parser gave the error no context."""
    ctx = exc.ctx
    if ctx is not None:
        where = ctx.command_path
    else:
        words = [a for a in (argv or []) if a and not a.startswith("-")]
        where = f"rgym {words[0]}" if words else "rgym"
    help_hint = f"`{where} --help` lists the options"
    if isinstance(exc, click.NoSuchOption):
        guess = f"did you mean {_or_list(exc.possibilities)}? " if exc.possibilities else ""
        return f"{where}: no option {exc.option_name}; {guess or ''}{help_hint}"
    if isinstance(exc, click.MissingParameter) and exc.param is not None and ctx is not None:
        param = exc.param
        if isinstance(param, click.Argument):
            usage = " ".join(ctx.command.collect_usage_pieces(ctx))
            return (f"{where}: missing argument {param.human_readable_name}; usage: {where} "
                    f"{usage}")
        return f"{where}: missing option {param.opts[0]}; {help_hint}"
    message = exc.format_message().strip().rstrip(".")
    if message.startswith("No such command"):
        name = message.split("'")[1] if message.count("'") >= 2 else ""
        commands = ctx.command.list_commands(ctx) if ctx is not None and isinstance(
            ctx.command, click.Group) else []
        import difflib

        close = difflib.get_close_matches(name, commands, n=3, cutoff=0.6)
        guess = f"did you mean {_or_list(close)}? " if close else ""
        return f"{where}: no command '{name}'; {guess}`{where} --help` lists the commands"
    message = message[:1].lower() + message[1:]
    return f"{where}: {message} (`{where} --help` for the options)"


def main() -> None:
    """Console-script entry point: errors of usage (click's and rgym's) are one line
    on stderr and exit 2."""
    warnings.showwarning = _show_warning
    try:
        code = cli.main(prog_name="rgym", standalone_mode=False)
    except click.UsageError as exc:
        click.echo(f"error: {usage_error_line(exc, sys.argv[1:])}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("cancelled", err=True)
        sys.exit(EXIT_CANCELLED)
    except (SpecError, RegistryError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":  # `python -m rgym_core.cli`: run the module's importable copy
    from rgym_core.cli import main as _main

    _main()


__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "cli",
           "get_registry", "main", "output_folder_problem", "usage_error_line"]

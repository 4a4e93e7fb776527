"""Commands imported on first use: what ``rgym_cli_commands`` usually returns.

A :class:`LazyCommand` is a name, one line of help and the ``module:attribute``
of the real :class:`click.Command`, imported only when the command runs or shows
its own help, so ``rgym --help`` imports no command module.  Plugins build them
with :func:`rgym_core.lazy_command`.
"""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyCommand(click.Command):
    """A command known by its name and one line of help; the real
    :class:`click.Command` (``target``, written ``"module:attribute"``) is imported
    the first time the command runs or shows its own help."""

    def __init__(self, name: str, target: str, help: str, *, hidden: bool = False) -> None:
        module, sep, attribute = target.partition(":")
        if not sep or not module or not attribute:
            raise ValueError(f"lazy command '{name}': target must be 'module:attribute', got {target!r}")
        super().__init__(name, help=help, short_help=help, hidden=hidden)
        self.target = target
        self._loaded: click.Command | None = None

    def load(self) -> click.Command:
        """Import and return the real command (raising a :class:`click.ClickException`
        that names the module when it cannot be imported)."""
        if self._loaded is None:
            module, _, attribute = self.target.partition(":")
            try:
                obj: Any = importlib.import_module(module)
                for part in attribute.split("."):
                    obj = getattr(obj, part)
            except Exception as exc:  # noqa: BLE001 - a broken plugin command is reported
                raise click.ClickException(
                    f"the command '{self.name}' failed to load from {self.target} "
                    f"({type(exc).__name__}: {exc})") from None
            if not isinstance(obj, click.Command):
                raise click.ClickException(f"the command '{self.name}': {self.target} is not a "
                                           f"click command")
            self._loaded = obj
        return self._loaded

    # Used directly (outside RgymGroup, which hands out the loaded command):
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        return self.load().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        return self.load().invoke(ctx)

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help or ""


def lazy_command(name: str, target: str, help: str, *, hidden: bool = False) -> LazyCommand:
    """A command for ``rgym_cli_commands`` that is imported on first use::

        @hookimpl
        def rgym_cli_commands():
            return [lazy_command("audit", "rgym_integrity.cli:audit",
                                 "Check run directories for signs of tampering.")]

    ``help`` is the line ``rgym --help`` shows (keep it the first line of the
    command's docstring).
    """
    return LazyCommand(name, target, help, hidden=hidden)


__all__ = ["LazyCommand", "lazy_command"]

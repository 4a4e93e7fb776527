"""The ``rgym`` entry point of rgym-view: three commands, imported only when they run."""

from __future__ import annotations

from typing import Any

from rgym_core import hookimpl


@hookimpl
def rgym_cli_commands() -> list[Any]:
    from rgym_core.cli import lazy_command

    return [
        lazy_command("view", "rgym_view.cli:view",
                     "Write one self-contained HTML viewer of runs and their trajectories."),
        lazy_command("analyze", "rgym_view.cli:analyze",
                     "Analyse runs: action mix, how episodes ended, failure modes, plots."),
        lazy_command("export", "rgym_view.cli:export",
                     "Export runs to other tools' formats (inspect: Inspect AI .eval logs)."),
    ]

"""The ``rgym`` entry point of rgym-view: five commands, imported only when they run."""

from __future__ import annotations

from typing import Any

from rgym_core import hookimpl


@hookimpl
def rgym_cli_commands() -> list[Any]:
    from rgym_core import lazy_command

    return [
        lazy_command("view", "rgym_view.cli:view",
                     "Write one self-contained HTML viewer of runs and their trajectories."),
        lazy_command("analyze", "rgym_view.cli:analyze",
                     "Analyse runs: action mix, how episodes ended, failure modes, plots."),
        lazy_command("export", "rgym_view.cli:export",
                     "Export runs to other tools' formats (inspect: Inspect AI .eval logs)."),
        lazy_command("report", "rgym_view.cli:report",
                     "Write a results report (leaderboard, profiles, per-task tables, integrity) of runs."),
        lazy_command("import", "rgym_view.cli:import_",
                     "Import other tools' runs as run folders (mlgym-traj: MLGym's .traj files)."),
    ]

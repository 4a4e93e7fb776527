"""``rgym check-pack PATH`` and ``rgym new-pack NAME``: for pack authors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rgym_core.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE


@click.command("check-pack")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--profile", "profiles", multiple=True, metavar="NAME",
              help="Check only this profile of each task (repeatable; default: every profile).")
@click.option("--fast", is_flag=True, help="Static checks only: do not run the baselines.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              envvar="RGYM_DATA_DIR", help="Folder with one sub-folder per dataset (env RGYM_DATA_DIR).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check_pack_cmd(path: Path, profiles: tuple[str, ...], fast: bool, data_dir: Path | None,
                   as_json: bool) -> None:
    """Check a pack: specs load, files exist, graders run on the baselines."""
    from rgym_core.checks import check_pack

    report = check_pack(path, profiles=list(profiles) or None, run_baselines=not fast,
                        data_dir=data_dir, progress=None if as_json else _progress)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        report.print()
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


def _progress(message: str) -> None:
    click.echo(message, err=True)


@click.command("new-pack")
@click.argument("name")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to create (default: ./rgym-task-NAME).")
@click.option("--task", "task_name", default="example", show_default=True,
              help="Name of the pack's first task.")
def new_pack_cmd(name: str, dest: Path | None, task_name: str) -> None:
    """Write a working task-pack skeleton: spec, starter, grader and tests."""
    from rgym_core.scaffold import ScaffoldError, new_pack

    try:
        folder = new_pack(name, dest=dest, task=task_name)
    except ScaffoldError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(f"wrote {folder}")
    click.echo("next: pip install -e " + str(folder) + f" && rgym check-pack {folder} "
               f"&& python -m pytest {folder / 'tests'}")

"""``rgym grade``: grade or finish run directories that an interruption left unscored.

Exit codes, as ``rgym run``: 0 every run needing it was graded or finished (or
nothing needed it); 1 a run could not be graded (still running, the task is not
installed, the grader failed); 2 bad input (a path that is not a run directory,
runs folder or sweep folder).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rgym_core.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, get_registry
from rgym_core.grade_runs import FinishOutcome, GradeError, finish_run
from rgym_core.records import ExitStatus
from rgym_core.rundir import RunDir, RunDirError, RunState, iter_run_dirs
from rgym_core.serialization import unstructure


def _needs_grading(run: RunDir, regrade: bool) -> bool:
    state = run.state()
    if state is RunState.COMPLETE:
        return regrade or run.result().status is ExitStatus.UNGRADED
    return state in (RunState.INCOMPLETE, RunState.CORRUPT)


@click.command("grade")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--regrade", is_flag=True,
              help="Grade complete runs again from their workspace.tar.gz too.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per run.")
@click.pass_context
def grade(ctx: click.Context, paths: tuple[Path, ...], regrade: bool, as_json: bool) -> None:
    """Grade run directories that were interrupted: ungraded or killed runs.

    PATHS are run directories, runs folders or sweep folders.  A run whose final
    grading a signal stopped (status "ungraded") is graded from its
    workspace.tar.gz; a run killed before it wrote result.json gets a result
    rebuilt from its trajectory, and its workspace is graded when it was archived
    or is still on this machine.  Running runs are left alone.
    """
    runs: list[RunDir] = []
    try:
        for path in paths:
            runs.extend(iter_run_dirs(path))
    except RunDirError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    todo = [r for r in runs if _needs_grading(r, regrade)]
    if not todo:
        click.echo(f"nothing to grade: {len(runs)} run(s), each complete or still running"
                   + ("" if regrade else " (--regrade grades complete runs again)"), err=True)
        sys.exit(EXIT_OK)
    registry = get_registry(ctx)
    failed = 0
    for run in todo:
        try:
            outcome = finish_run(run.path, registry, regrade=regrade)
        except (GradeError, RunDirError) as exc:
            failed += 1
            outcome = FinishOutcome(run.path, "failed", str(exc))
        if outcome.result is not None and outcome.action == "graded" \
                and outcome.result.final_scores is None:
            failed += 1
        if as_json:
            click.echo(json.dumps({"run_dir": str(outcome.path), "action": outcome.action,
                                   "message": outcome.message,
                                   "result": unstructure(outcome.result) if outcome.result else None},
                                  default=str))
        else:
            click.echo(f"{outcome.action}: {outcome.path}: {outcome.message}")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)

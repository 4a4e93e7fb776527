"""``rgym score``: the scoring protocol on runs, long-format files or MLGym's tables.

Exit codes, as ``rgym run``: 0 scored; 2 bad input (a missing or malformed file,
each error one line naming the file, or usage).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rgym_core.scoring.inputs import InputError

EXIT_USAGE = 2


@click.command("score")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--input", "long_input", type=click.Path(path_type=Path),
              help="A long-format CSV or JSON Lines file: solver,task,run,metric,value"
                   "[,direction,subtask,primary,tolerance] (tolerance: on the baseline's rows, "
                   "its noise).")
@click.option("--best-table", type=click.Path(path_type=Path),
              help="MLGym's best-attempt table (Task,<solver>,...); needs --last-table.")
@click.option("--last-table", type=click.Path(path_type=Path),
              help="MLGym's last-submission table; needs --best-table.")
@click.option("--baseline-column", default="baseline", show_default=True,
              help="The baseline solver's name (a column of the tables, or a solver of --input).")
@click.option("--baselines", type=click.Choice(["auto", "published", "measured"]), default="auto",
              show_default=True,
              help="Which baseline figures RUN_DIRS are scored against: the original benchmark's "
                   "published ones, rgym's measured ones, or auto (published for mlgym- and "
                   "researchgym-profile runs, as the originals score them; measured otherwise).")
@click.option("--minimize", multiple=True, metavar="TASK",
              help="A task (table row or --input task) whose metric is minimised; repeatable.")
@click.option("--solver-key", default=None,
              help="Group runs by this field instead of agent+model: agent, model, or a tag name.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="How to print the results.")
@click.option("--plot", type=click.Path(path_type=Path),
              help="Write the best and last performance profiles here (.png, .svg or .pdf).")
@click.option("--output", type=click.Path(path_type=Path),
              help="Write the printed results to this file instead of stdout.")
@click.option("--strict", is_flag=True,
              help="A result.json that cannot be read is an error (default: skipped with a "
                   "warning naming it).")
@click.option("--include-infra", is_flag=True,
              help="Score the runs the infrastructure ended (rgym error, sandbox failure, "
                   "cancelled, ungraded) like any other (default: counted apart, left out).")
@click.option("--exclude-flagged", is_flag=True,
              help="Leave out the runs the integrity monitor flagged (they are listed either way; "
                   "`rgym show RUN_DIR` lists a run's findings).")
def score(run_dirs: tuple[Path, ...], long_input: Path | None, best_table: Path | None,
          last_table: Path | None, baseline_column: str, baselines: str, minimize: tuple[str, ...],
          solver_key: str | None, fmt: str, plot: Path | None, output: Path | None,
          strict: bool, include_infra: bool, exclude_flagged: bool) -> None:
    """Score episodes: best attempt and last submission, best of k runs, MLGym's
    performance profiles and AUP, rankings, and ResearchGym's rates.

    Reads run directories (RUN_DIRS: run directories, runs folders or sweep
    folders), a long-format file (--input), or MLGym's published tables
    (--best-table and --last-table).  Runs without a result are listed by name
    (running, or incomplete: `rgym grade RUN_DIR` finishes them).  Runs of one
    task with different profiles are scored as separate tasks (task@profile).

    The solver "baseline" (or the --baseline-column name) is the task's own
    baseline score and "reference" its reference score, as in MLGym's tables; in
    --input and the tables a solver so named is that score.  In RUN_DIRS an agent
    with such a name (--agent baseline) is shown as "baseline-agent" with its own
    runs, and a note says so.

    Baselines: in RUN_DIRS each task has two kinds of baseline figure: the
    original benchmark's published one (task.yaml's `published`, with its
    source) and rgym's measured one (`baseline.scores`, with where it was
    measured).  --baselines chooses; by default (auto) mlgym- and
    researchgym-profile runs use the published figures, as MLGym and
    ResearchGym do, and other profiles the measured ones.  The scores table
    names the set each task used, and a note cites the published sources.  A
    figure measured on a test fixture (baseline.measured_on: fixture) is never
    used; runs recorded before task specs carried these fields take them from
    the installed task.

    Runs the integrity monitor (rgym-integrity) flagged are listed under "Flagged
    runs" with the kinds of their findings; --exclude-flagged leaves them out.

    Improved: a run counts as improving on the baseline (ResearchGym's improvement
    rate) only when its last submission beats the baseline by more than the
    baseline's measured noise: the task spec's baseline tolerances (or tolerance),
    as each run's config.json records it, else half a unit in the last digit of
    the baseline score; in --input, the baseline rows' tolerance column.  A re-run
    of the baseline is therefore not an improvement.

    Ties: solvers whose ranked value is identical (exactly equal mean rank, Borda
    total, or AUP to 3 decimals) share a rank, and the next rank is skipped (1, 1,
    3), in every table.

    Coverage: as in MLGym, a solver without a valid score on a task (no run, or
    only failed runs) is infeasible there, which still earns AUP; a warning gives
    the AUP of a solver with no valid score at all.
    """
    from rgym_core.scoring import api, report

    sources = sum([bool(run_dirs), long_input is not None,
                   best_table is not None or last_table is not None])
    if sources != 1:
        raise click.UsageError("give exactly one input: RUN_DIRS, --input FILE, or "
                               "--best-table B.csv --last-table L.csv")
    if (best_table is None) != (last_table is None):
        raise click.UsageError("--best-table and --last-table go together")
    if baselines != "auto" and not run_dirs:
        raise click.UsageError("--baselines needs RUN_DIRS (in --input and the tables the "
                               "baseline is the 'baseline' solver's rows)")
    if exclude_flagged and not run_dirs:
        raise click.UsageError("--exclude-flagged needs RUN_DIRS (the integrity monitor's findings "
                               "are in run directories)")
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise click.UsageError(f"--plot {plot}: use a .png, .svg or .pdf file name")
    try:
        if run_dirs:
            result = api.score_runs(run_dirs, solver_key=solver_key, baseline=baseline_column,
                                    strict=strict, include_infra=include_infra,
                                    exclude_flagged=exclude_flagged, baselines=baselines)
        elif long_input is not None:
            result = api.score_long(long_input, baseline=baseline_column, minimize=minimize)
        else:
            result = api.score_wide(best_table, last_table, baseline=baseline_column,  # type: ignore[arg-type]
                                    minimize=minimize)
    except (InputError, ValueError, OSError) as exc:
        click.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    for line in report.warning_lines(result):
        click.echo(line, err=True)
    if fmt != "table":
        for note in result.notes:
            click.echo(note, err=True)
    if fmt == "json":
        text = report.to_json(result)
    elif fmt == "csv":
        text = report.to_csv(result)
    else:
        text = None
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            from rich.console import Console

            with output.open("w", encoding="utf-8") as fh:
                report.print_tables(result, Console(file=fh, width=200))
        else:
            output.write_text(text, encoding="utf-8")
    elif text is None:
        report.print_tables(result)
    else:
        click.echo(text, nl=False)
    if plot is not None:
        report.plot_profiles(result, plot)
        click.echo(f"wrote {plot}", err=True)


def _one_line(exc: BaseException) -> str:
    """An error as one line; an ``OSError`` names its file."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

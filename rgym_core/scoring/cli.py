"""``rgym score``: the scoring protocol on runs, long-format files or MLGym's tables."""

from __future__ import annotations

from pathlib import Path

import click

from rgym_core.scoring.inputs import InputError


@click.command("score")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--input", "long_input", type=click.Path(path_type=Path),
              help="A long-format CSV or JSON Lines file: solver,task,run,metric,value"
                   "[,direction,subtask,primary].")
@click.option("--best-table", type=click.Path(path_type=Path),
              help="MLGym's best-attempt table (Task,<solver>,...); needs --last-table.")
@click.option("--last-table", type=click.Path(path_type=Path),
              help="MLGym's last-submission table; needs --best-table.")
@click.option("--baseline-column", default="baseline", show_default=True,
              help="The baseline solver's name (a column of the tables, or a solver of --input).")
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
def score(run_dirs: tuple[Path, ...], long_input: Path | None, best_table: Path | None,
          last_table: Path | None, baseline_column: str, minimize: tuple[str, ...],
          solver_key: str | None, fmt: str, plot: Path | None, output: Path | None) -> None:
    """Score episodes: best attempt and last submission, best of k runs, MLGym's
    performance profiles and AUP, rankings, and ResearchGym's rates.

    Reads run directories (every result.json under RUN_DIRS), a long-format file
    (--input), or MLGym's published tables (--best-table and --last-table).

    The solver "baseline" (or the --baseline-column name) is the task's own
    baseline score and "reference" its reference score, as in MLGym's tables; in
    --input and the tables a solver so named is that score.  In RUN_DIRS an agent
    with such a name (--agent baseline) is shown as "baseline-agent" with its own
    runs, and a note says so.
    """
    from rgym_core.scoring import api, report

    sources = sum([bool(run_dirs), long_input is not None,
                   best_table is not None or last_table is not None])
    if sources != 1:
        raise click.UsageError("give exactly one input: RUN_DIRS, --input FILE, or "
                               "--best-table B.csv --last-table L.csv")
    if (best_table is None) != (last_table is None):
        raise click.UsageError("--best-table and --last-table go together")
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise click.UsageError(f"--plot {plot}: use a .png, .svg or .pdf file name")
    try:
        if run_dirs:
            result = api.score_runs(run_dirs, solver_key=solver_key, baseline=baseline_column)
        elif long_input is not None:
            result = api.score_long(long_input, baseline=baseline_column, minimize=minimize)
        else:
            result = api.score_wide(best_table, last_table, baseline=baseline_column,  # type: ignore[arg-type]
                                    minimize=minimize)
    except (InputError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
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

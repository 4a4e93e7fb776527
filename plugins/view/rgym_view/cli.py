"""``rgym view``, ``rgym analyze`` and ``rgym export inspect``."""

from __future__ import annotations

import json
import webbrowser
from pathlib import Path

import click

from rgym_core.cli import EXIT_USAGE
from rgym_core.rundir import RunDirError


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_USAGE)


def _warn_broken(problems: list[str], reported: set[str] | None = None) -> None:
    """One line on standard error per broken run (once each, when ``reported`` is given)."""
    for line in problems:
        if reported is not None:
            if line in reported:
                continue
            reported.add(line)
        click.echo(f"warning: broken run: {line}", err=True)


def _paths(paths: tuple[Path, ...]) -> list[Path]:
    out = list(paths) or [Path("runs")]
    for p in out:
        if not p.exists():
            _fail(f"{p}: no such file or directory (give a run directory, a runs folder or a sweep folder)")
    return out


@click.command("view")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="The HTML file to write (default: rgym-view.html in the folder given).")
@click.option("--serve", is_flag=True,
              help="Also serve the page on loopback and rebuild it while runs are live.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port for --serve (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address for --serve.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@click.option("--no-steps", is_flag=True, help="Only the run list (no trajectories): a smaller file.")
@click.option("--no-compress", is_flag=True,
              help="Embed trajectories as plain JSON (larger; for browsers without DecompressionStream).")
@click.option("--max-output-chars", type=click.IntRange(min=1000), default=200_000, show_default=True,
              help="Observations longer than this are cut in the middle (trajectory.jsonl keeps them).")
@click.option("--title", default=None, help="The page's title.")
def view(paths: tuple[Path, ...], output: Path | None, serve: bool, port: int, host: str,
         open_browser: bool, no_steps: bool, no_compress: bool, max_output_chars: int,
         title: str | None) -> None:
    """Write one self-contained HTML viewer of runs and their trajectories.

    PATHS are run directories, runs folders or sweep folders (default: ./runs).
    The file needs no server and no network: open it from disk.
    """
    from rgym_view.html import default_output, write_viewer

    targets = _paths(paths)
    out = output or default_output(targets)

    reported: set[str] = set()

    def build() -> tuple[Path, int]:
        problems: list[str] = []
        done = write_viewer(targets, out, compress=not no_compress, with_steps=not no_steps,
                            max_output_chars=max_output_chars, live=serve, title=title,
                            problems=problems)
        _warn_broken(problems, reported)
        return done

    try:
        if not serve:
            written, count = build()
            broken = f", {len(reported)} broken" if reported else ""
            click.echo(f"wrote {written} ({count} run{'s' if count != 1 else ''}{broken}, "
                       f"{written.stat().st_size / 1e6:.1f} MB)")
            if open_browser:
                webbrowser.open(written.resolve().as_uri())
            return
        from rgym_view.serve import ViewerServer

        try:
            server = ViewerServer(targets, out, host=host, port=port, build=build)
        except (ValueError, OSError) as exc:
            _fail(str(exc))
        server.start()
        click.echo(f"wrote {out}; serving it on {server.url} (rebuilt when runs change; Ctrl-C stops)")
        if open_browser:
            webbrowser.open(server.url)
        try:
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
    except RunDirError as exc:
        _fail(str(exc))


@click.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--plots", "plots_dir", type=click.Path(path_type=Path), default=None,
              help="Folder for the plots (PNG and SVG; default: rgym-analysis/ beside the runs).")
@click.option("--no-plots", is_flag=True, help="Tables only.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON for scripts.")
@click.option("--repeat-threshold", type=click.IntRange(min=2), default=3, show_default=True,
              help="The same failing command this many times in a row is a debug loop.")
@click.option("--idle-s", type=click.FloatRange(min=0), default=300.0, show_default=True,
              help="A step waiting this long (sleep, wait, a silent command) is a long idle wait.")
@click.option("--unused-budget", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="A run that submits with more than this share of every budget left left it unused.")
def analyze(paths: tuple[Path, ...], plots_dir: Path | None, no_plots: bool, as_json: bool,
            repeat_threshold: int, idle_s: float, unused_budget: float) -> None:
    """Analyse runs: action mix, how episodes ended, failure modes, plots.

    Per solver and task: the mix of actions (edit, run, view, search, validate,
    submit, tool calls), the endings, and failure modes found automatically
    (debug loops, premature submits, unused budget, editor rejections in a row,
    long idle waits, cost per point of improvement).
    """
    from rgym_view.analysis import AnalysisOptions, analyze_paths, render_text

    targets = _paths(paths)
    options = AnalysisOptions(repeat_threshold=repeat_threshold, idle_s=idle_s,
                              unused_budget=unused_budget)
    try:
        report = analyze_paths(targets, options)
    except RunDirError as exc:
        _fail(str(exc))
    written: list[Path] = []
    if not no_plots and report.runs:
        from rgym_view.plots import write_plots

        folder = plots_dir or (targets[0] if targets[0].is_dir() else targets[0].parent) / "rgym-analysis"
        written = write_plots(report, folder)
    if as_json:
        _warn_broken([r.problem for r in report.runs if r.problem] + report.skipped)
        data = report.to_dict()
        data["plots"] = [str(p) for p in written]
        click.echo(json.dumps(data, indent=2, default=str))
        return
    click.echo(render_text(report))
    if written:
        click.echo(f"\nplots: {', '.join(sorted({str(p.parent) for p in written}))} "
                   f"({len(written)} files: {', '.join(sorted({p.stem for p in written}))})")


@click.group("export")
def export() -> None:
    """Export runs to other tools' formats (inspect: Inspect AI .eval logs)."""


@export.command("inspect")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Folder for the .eval logs (default: inspect-logs/ beside the runs).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export_inspect(paths: tuple[Path, ...], out_dir: Path | None, as_json: bool) -> None:
    """Write Inspect AI .eval logs (one per run) that `inspect view` shows.

    Each run becomes one log with one sample: the messages (system, task,
    assistant turns with their tool calls, tool results), the model events with
    tokens, the scores of every grading and the model usage.
    """
    from rgym_view.inspect_log import export_runs

    targets = _paths(paths)
    folder = out_dir or (targets[0] if targets[0].is_dir() else targets[0].parent) / "inspect-logs"
    broken: list[str] = []
    try:
        written = export_runs(targets, folder, broken=broken)
    except RunDirError as exc:
        _fail(str(exc))
    _warn_broken(broken)
    if as_json:
        click.echo(json.dumps([{"run_dir": str(r), "log": str(p)} for r, p in written], indent=2))
        return
    if not written and not broken:
        click.echo(f"no runs under {', '.join(str(t) for t in targets)}: nothing to export")
        return
    for run, log in written:
        click.echo(f"{run} -> {log}")
    left = f" ({len(broken)} broken run{'s' if len(broken) != 1 else ''} left out)" if broken else ""
    click.echo(f"wrote {len(written)} log{'s' if len(written) != 1 else ''} to {folder}{left}; "
               f"`inspect view --log-dir {folder}` shows them")

"""``rgym view``, ``rgym analyze`` and ``rgym export inspect``."""

from __future__ import annotations

import json
import webbrowser
from pathlib import Path

import click

from rgym_core import EXIT_USAGE, RunDirError


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
@click.option("--no-diffs", is_flag=True,
              help="Leave out the workspace diffs (the final workspace against the starter files, and "
                   "each validate snapshot's changes): no archive is read.")
@click.option("--no-compress", is_flag=True,
              help="Embed trajectories as plain JSON (larger; for browsers without DecompressionStream).")
@click.option("--max-output-chars", type=click.IntRange(min=1000), default=200_000, show_default=True,
              help="Observations longer than this are cut in the middle (trajectory.jsonl keeps them).")
@click.option("--title", default=None, help="The page's title.")
def view(paths: tuple[Path, ...], output: Path | None, serve: bool, port: int, host: str,
         open_browser: bool, no_steps: bool, no_diffs: bool, no_compress: bool, max_output_chars: int,
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
                            problems=problems, with_diffs=not no_diffs)
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
@click.option("--stale-s", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="An episode going on this long after its last improving validation (and --stale-share "
                   "of its time) spent it after the score stopped improving.")
@click.option("--stale-share", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="The share of the episode's time after its last improving validation that is noted.")
def analyze(paths: tuple[Path, ...], plots_dir: Path | None, no_plots: bool, as_json: bool,
            repeat_threshold: int, idle_s: float, unused_budget: float, stale_s: float,
            stale_share: float) -> None:
    """Analyse runs: action mix, how episodes ended, failure modes, plots.

    Per solver and task: the mix of actions (edit, run, view, search, validate,
    submit, tool calls), the endings, and failure modes found automatically
    (debug loops, premature submits, unused budget, editor rejections in a row,
    long idle waits, cost per point of improvement) and those of long runs
    (background jobs writing the same files at once, foreground commands the
    per-action timeout killed, results graded from a failed job, time spent after
    the score stopped improving).
    """
    from rgym_view.analysis import AnalysisOptions, analyze_paths, render_text

    targets = _paths(paths)
    options = AnalysisOptions(repeat_threshold=repeat_threshold, idle_s=idle_s,
                              unused_budget=unused_budget, stale_s=stale_s, stale_share=stale_share)
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
    """Write Inspect AI .eval logs that `inspect view` shows (needs inspect-ai).

    One log per task, agent (with its options) and model: each run is one epoch of
    its one sample, so Inspect gives each metric's mean and standard error over the
    seeds.  A sample holds the messages (system, task, assistant turns with their
    tool calls, tool results), the model events (tokens, tool definitions,
    generation settings, retries), the scores of every grading, the integrity
    findings, failure modes and the archived workspace's files.
    """
    from rgym_view.inspect_log import InspectMissing, export_runs

    targets = _paths(paths)
    folder = out_dir or (targets[0] if targets[0].is_dir() else targets[0].parent) / "inspect-logs"
    broken: list[str] = []
    try:
        written = export_runs(targets, folder, broken=broken)
    except (RunDirError, InspectMissing) as exc:
        _fail(str(exc))
    _warn_broken(broken)
    if as_json:
        click.echo(json.dumps([{"run_dir": str(r), "log": str(p), "epoch": n} for r, p, n in written], indent=2))
        return
    if not written and not broken:
        click.echo(f"no runs under {', '.join(str(t) for t in targets)}: nothing to export")
        return
    for run, log, epoch in written:
        click.echo(f"{run} -> {log} (epoch {epoch})")
    logs = len({p for _, p, _ in written})
    left = f" ({len(broken)} broken run{'s' if len(broken) != 1 else ''} left out)" if broken else ""
    click.echo(f"wrote {logs} log{'s' if logs != 1 else ''} ({len(written)} run{'s' if len(written) != 1 else ''}) "
               f"to {folder}{left}; `inspect view --log-dir {folder}` shows them")


@click.command("report")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="The file to write (default: rgym-report.html, or .md with --format markdown, "
                   "in the folder given).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True,
              help="html: one self-contained page; markdown: the leaderboard and per-task tables.")
@click.option("--figures", "figures_dir", type=click.Path(path_type=Path), default=None,
              help="Also write the figures here as PNG and SVG files.")
@click.option("--viewer", "viewer_path", type=click.Path(path_type=Path), default=None,
              help="Also write `rgym view`'s page here and link each run to it (default: links to "
                   "the run folders).")
@click.option("--exclude-flagged", is_flag=True,
              help="Leave the runs the integrity monitor flagged out of every figure (they are "
                   "listed either way).")
@click.option("--title", default=None, help="The page's title.")
def report(paths: tuple[Path, ...], output: Path | None, fmt: str, figures_dir: Path | None,
           viewer_path: Path | None, exclude_flagged: bool, title: str | None) -> None:
    """Write a results report of runs or a sweep: the leaderboard (AUP, ties
    shown as ties), performance profiles, per-task tables with mean ± standard
    error, cost against score and AUP against cost, each run's integrity verdict,
    and links to every trajectory.

    PATHS are run directories, runs folders or sweep folders (default: ./runs).
    The numbers are `rgym score PATHS --format json`'s.  The HTML page needs no
    server and no network.
    """
    from rgym_core.scoring import InputError
    from rgym_view.report import build_report, render_html, render_markdown, write_figures

    targets = _paths(paths)
    base = targets[0] if targets[0].is_dir() else targets[0].parent
    out = output or base / ("rgym-report.md" if fmt == "markdown" else "rgym-report.html")
    try:
        data = build_report(targets, exclude_flagged=exclude_flagged, title=title)
    except (InputError, RunDirError) as exc:
        _fail(str(exc).splitlines()[0])
    broken = [r for r in data["runs"] if r["problem"]]
    _warn_broken([r["problem"] for r in broken])
    flagged = sum(1 for r in data["runs"] if r["integrity"]["state"] == "flagged")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "markdown":
        out.write_text(render_markdown(data), encoding="utf-8")
        if figures_dir is not None:
            write_figures(data, figures_dir)
    else:
        if viewer_path is not None:
            from rgym_view.html import write_viewer

            write_viewer(targets, viewer_path, problems=[])
        figures = write_figures(data, figures_dir)
        out.write_text(render_html(data, figures, page=out, viewer=viewer_path), encoding="utf-8")
    score = data["score"]
    click.echo(f"wrote {out} ({len(score['tasks'])} task(s), {len(score['solvers'])} solver(s), "
               f"{len(data['runs'])} run(s), {flagged} flagged, {len(broken)} broken)")


@click.group("import")
def import_() -> None:
    """Import other tools' runs as rgym run folders (mlgym-traj: MLGym's .traj files)."""


@import_.command("mlgym-traj")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True,
              help="Where the run folders are written.")
@click.option("--task", default=None,
              help="The rgym task of every file (default: from the file's name, MLGym's task id).")
@click.option("--model", default=None,
              help="The model of every file (default: from MLGym's folder name, <model>__<task>__...).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_context
def import_mlgym_traj(ctx: click.Context, paths: tuple[Path, ...], runs_dir: Path, task: str | None,
                      model: str | None, as_json: bool) -> None:
    """Convert MLGym's .traj trajectories into rgym run folders that `rgym view`,
    `rgym analyze` and `rgym score` read.

    PATHS are .traj files or folders holding them (MLGym's trajectories/ folder).
    A results.json beside a .traj gives the run's baseline scores.  A file that is
    not in MLGym's format is reported (one line naming the file and the field) and
    the others are imported; the exit code is then 2.
    """
    from rgym_core import get_registry
    from rgym_view.mlgym_traj import TrajFormatError, convert, find_traj_files

    for p in paths:
        if not p.exists():
            _fail(f"{p}: no such file or directory (give MLGym's .traj files or folders holding them)")
    files = list(find_traj_files(paths))
    if not files:
        _fail(f"{', '.join(str(p) for p in paths)}: no .traj file found (MLGym writes <task id>.traj "
              "in each run's folder)")
    try:
        registry = get_registry(ctx)
    except Exception:  # noqa: BLE001 - without the registry the files' own figures are used
        registry = None
    written: list[tuple[Path, Path]] = []
    bad = 0
    for f in files:
        try:
            written.append((f, convert(f, runs_dir, registry=registry, task=task, model=model)))
        except TrajFormatError as exc:
            bad += 1
            click.echo(f"error: {exc}", err=True)
    if as_json:
        click.echo(json.dumps([{"traj": str(f), "run_dir": str(r)} for f, r in written], indent=2))
    else:
        for f, r in written:
            click.echo(f"{f} -> {r}")
        click.echo(f"imported {len(written)} trajector{'y' if len(written) == 1 else 'ies'} into {runs_dir}"
                   + (f" ({bad} not imported)" if bad else "")
                   + f"; `rgym view {runs_dir}`, `rgym score {runs_dir}` read them")
    if bad:
        raise SystemExit(EXIT_USAGE)

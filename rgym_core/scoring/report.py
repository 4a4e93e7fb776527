"""Showing a :class:`~rgym_core.scoring.api.ScoreReport`: rich tables, JSON,
CSV, and the performance-profile plot."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rgym_core.scoring.api import ScoreReport


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 1e6 else f"{value:.3g}"


def _pm(mean: float | None, se: float | None) -> str:
    if mean is None:
        return "-"
    return _fmt(mean) if se is None else f"{_fmt(mean)}±{_fmt(se)}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _table(title: str, first: str, numbers: tuple[str, ...], caption: str | None = None) -> Table:
    """A table whose first column (names) folds long names and whose number
    columns never wrap, so that it fits an 80-column terminal."""
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, caption_justify="left",
                  pad_edge=False, collapse_padding=True)
    table.add_column(first, overflow="fold", min_width=12)
    for col in numbers:
        table.add_column(col, justify="right", no_wrap=True)
    return table


def _task_row(table: Table, label: str) -> None:
    """A row naming the task of the solver rows below it."""
    table.add_row(f"[bold]{escape(label)}[/bold]", *[""] * (len(table.columns) - 1))


def tables(report: ScoreReport) -> list[Table]:
    """The rich tables ``rgym score`` prints, in order."""
    out: list[Table] = []
    tasks = report.profiles.tasks
    p = report.profiles
    with_infra = any(s.infra for s in report.summaries)
    if report.summaries:
        scores = _table("Scores per task: best attempt and last submission, best of k runs",
                        "task / solver",
                        ("runs", "failed", *(("infra",) if with_infra else ()), "best@k", "last@k",
                         "best\nmean±se", "last\nmean±se"),
                        caption=("infra: runs ended by the infrastructure (rgym error, sandbox "
                                 "failure, cancelled, ungraded), left out of every figure; "
                                 "--include-infra scores them") if with_infra else None)
    else:
        scores = _table("Scores per task: best attempt and last submission",
                        "task / solver", ("best", "last", "ratio\nbest", "ratio\nlast"))
    by_key = {(s.task, s.solver): s for s in report.summaries}
    for t in tasks:
        arrow = report.tasks[t].direction[:3]
        kind = report.tasks[t].baseline_kind
        _task_row(scores, f"{t} ({arrow})" + (f"  baseline: {kind}" if kind else ""))
        solvers = sorted(p.solvers, key=lambda s: (s != report.baseline, s))
        if report.summaries:  # no row of dashes for a solver without a run on this task
            solvers = [x for x in solvers if (t, x) in by_key
                       or report.best_table.get(t, {}).get(x) is not None]
        for i, solver in enumerate(solvers):
            s = by_key.get((t, solver))
            if report.summaries:
                if s is None:
                    b = report.best_table.get(t, {}).get(solver)
                    cells = ("", "", *(("",) if with_infra else ()), _fmt(b), _fmt(b), "", "")
                else:
                    cells = (str(s.runs), str(s.failed), *((str(s.infra),) if with_infra else ()),
                             _fmt(s.best_at_k), _fmt(s.last_at_k),
                             _pm(s.best_mean, s.best_se), _pm(s.last_mean, s.last_se))
            else:
                cells = (_fmt(report.best_table.get(t, {}).get(solver)),
                         _fmt(report.last_table.get(t, {}).get(solver)),
                         _fmt(p.best.tasks[t].ratios[solver]),
                         _fmt(p.last.tasks[t].ratios[solver]))
            scores.add_row(f"  {escape(solver)}", *cells, end_section=i == len(solvers) - 1)
    out.append(scores)

    partial = set(report.partial_solvers())
    caption = "rank: by Best AUP; equal AUPs share a rank (1, 1, 3)"
    if partial:
        caption += (f". ! = a valid score on some tasks only: each other task counts as "
                    f"infeasible (as in MLGym), which still earns area (a solver with no valid "
                    f"score anywhere gets {p.best.floor:.3f} / {p.last.floor:.3f})")
    aup = _table(f"AUP (maximum T = {p.end:g})", "solver", ("rank", "Best AUP", "Last AUP", "tasks"),
                 caption=caption)
    for row in p.aup_rows():
        name = str(row["solver"])
        have, total = report.coverage.get(name, (len(p.tasks), len(p.tasks)))
        mark = " !" if name in partial else ""
        aup.add_row(escape(name), str(row["rank"]), f"{row['best_aup']:.3f}{mark}",
                    f"{row['last_aup']:.3f}{mark}", f"{have}/{total}")
    out.append(aup)

    ranks = _table("Rankings over tasks (rank, 1 = best; ties share a rank)", "solver",
                   ("best:\nmean rank", "best:\nBorda", "last:\nmean rank", "last:\nBorda"))
    r = p.rankings
    keys = [(k, m) for k in ("best", "last") for m in ("mean_rank", "borda")]
    for solver in r["best"]["mean_rank"]:
        ranks.add_row(escape(solver), *(str(p.positions[k][m][solver]) for k, m in keys))
    out.append(ranks)

    if report.rates:
        rates = _table("ResearchGym rates", "task / solver",
                       ("runs", "done", "improved", "norm@k", "norm\nmean", "RE@k", "RE\nmean"),
                       caption="done: share of (sub-)tasks completed; improved: share of runs "
                               "whose last submission beats the baseline by more than its "
                               "tolerance (its measured noise); norm: score vs the "
                               "reference (1 = reference); RE: RE-Bench, baseline 0, "
                               "reference 1.")
        task = None
        for i, x in enumerate(report.rates):
            if x.task != task:
                task = x.task
                _task_row(rates, x.task)
            last = i + 1 == len(report.rates) or report.rates[i + 1].task != x.task
            rates.add_row(f"  {escape(x.solver)}", str(x.runs), _pct(x.completion_rate),
                          _pct(x.improvement_rate), _fmt(x.normalized_at_k),
                          _fmt(x.normalized_mean), _fmt(x.rebench_at_k), _fmt(x.rebench_mean),
                          end_section=last)
        out.append(rates)
        subs = [x for x in report.rates if x.subtask_completion]
        if subs:
            sub = _table("ResearchGym sub-tasks", "task / sub-task / solver",
                         ("done", "best", "norm@k"),
                         caption="done: share of runs that completed the sub-task; best: its "
                                 "best value over runs; norm@k: best value vs the sub-task's "
                                 "reference (1 = reference). * = primary sub-task. not graded: "
                                 "declared by the original, not graded by rgym; completion and "
                                 "the means are over the graded ones.")
            for x in subs:
                info = report.tasks.get(x.task)
                graded_text = ""
                if info and any(not s.graded for s in info.subtasks):
                    graded_text = (f" ({sum(s.graded for s in info.subtasks)} of "
                                   f"{len(info.subtasks)} sub-tasks graded)")
                _task_row(sub, f"{x.task} / {x.solver}{graded_text}")
                order = [s.id for s in info.subtasks] if info else list(x.subtask_completion)
                primary = {s.id for s in info.subtasks if s.primary} if info else set()
                ungraded = {s.id for s in info.subtasks if not s.graded} if info else set()
                for i, sid in enumerate(order):
                    if sid in ungraded:
                        sub.add_row(f"  {escape(sid)}", "not graded", "-", "-",
                                    end_section=i == len(order) - 1)
                        continue
                    sub.add_row(f"  {escape(sid)}{' *' if sid in primary else ''}",
                                _pct(x.subtask_completion.get(sid)), _fmt(x.subtask_best.get(sid)),
                                _fmt(x.subtask_normalized_at_k.get(sid)),
                                end_section=i == len(order) - 1)
            out.append(sub)
    if report.solver_rates:
        over = _table(f"ResearchGym over all {len(report.profiles.tasks)} tasks", "solver",
                      ("tasks", "runs", "done", "improved", "norm@k\nmean", "RE@k\nmean"),
                      caption="done: sub-tasks completed, mean over all runs; improved: share of "
                              "all runs beating their task's baseline by more than its tolerance; "
                              "norm@k / RE@k: mean over "
                              "tasks of the Best@k normalised score, a task without one counting "
                              "0 (ResearchGym's leaderboard average); (n): tasks that had one.")
        for y in report.solver_rates:
            over.add_row(escape(y.solver), f"{y.tasks_run}/{y.tasks}", str(y.runs),
                         _pct(y.completion_rate), _pct(y.improvement_rate),
                         _fmt(y.normalized_at_k) + ("" if y.normalized_tasks == y.tasks
                                                    else f" ({y.normalized_tasks})"),
                         _fmt(y.rebench_at_k) + ("" if y.rebench_tasks == y.tasks
                                                 else f" ({y.rebench_tasks})"))
        out.append(over)
    if report.flagged:
        left_out = report.exclude_flagged
        flagged = _table("Flagged runs (integrity monitor)", "run directory", ("kinds", "scored"),
                         caption=("left out of every figure (--exclude-flagged); `rgym show RUN_DIR` "
                                  "lists the findings") if left_out else
                                 ("scored like any other run; --exclude-flagged leaves them out; "
                                  "`rgym show RUN_DIR` lists the findings"))
        for flag in report.flagged:
            label = escape(flag.path) + f"\n  [dim]{escape(flag.task)} / {escape(flag.solver)}[/dim]"
            for message in flag.findings[:2]:
                label += f"\n  [dim]- {escape(message[:150])}[/dim]"
            flagged.add_row(label, escape(", ".join(k.replace("_", " ") for k in flag.kinds)),
                            "no" if flag.excluded else "yes")
        out.append(flagged)
    if report.pending:
        # The run directory last: a long one folds onto the next lines with nothing
        # between its pieces, so it can be copied into `rgym grade RUN_DIR`.
        pending = Table(title="Runs without a result", box=box.SIMPLE_HEAD, caption_justify="left",
                        pad_edge=False, collapse_padding=True,
                        caption="running: its process is alive; incomplete: killed before it "
                                "wrote result.json (`rgym grade RUN_DIR` finishes it); corrupt: "
                                "result.json unreadable")
        pending.add_column("state", no_wrap=True)
        pending.add_column("steps", justify="right", no_wrap=True)
        pending.add_column("run directory", overflow="fold", min_width=12)
        for run in report.pending:
            who = " / ".join(x for x in (run.task, run.solver) if x)
            label = escape(run.path) + (f"\n  [dim]{escape(who)}[/dim]" if who else "")
            pending.add_row(run.state, str(run.steps), label)
        out.append(pending)
    return out


def print_tables(report: ScoreReport, console: Console | None = None) -> None:
    """Print every table, then the notes, to ``console`` (stdout by default; its
    width is the terminal's, else ``$COLUMNS``, else 160 columns)."""
    if console is None:
        wide = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
        console = Console(width=None if wide else 160)
    for t in tables(report):
        console.print(t)
    for note in report.notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)


def warning_lines(report: ScoreReport) -> list[str]:
    """The report's warnings as ``warning: ...`` lines (for stderr)."""
    return [f"warning: {w}" for w in report.warnings]


def to_json(report: ScoreReport) -> str:
    """The report as JSON text."""
    return json.dumps(report.to_data(), indent=2, allow_nan=False, default=str)


def to_csv(report: ScoreReport) -> str:
    """The report's numbers as one long CSV: ``table,task,solver,field,value``.

    ``table`` is ``best``/``last`` (best-of-k scores and ratios), ``summary``,
    ``aup``, ``rank_best``/``rank_last`` (competition ranks by ``mean_rank``,
    ``borda`` and ``aup``: equal values share a rank), ``rates``, ``subtask_rates``
    (task ``TASK/SUB-TASK``), ``rates_summary`` (per solver over every task),
    ``pending`` or ``flagged`` (runs the integrity monitor flagged).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", "task", "solver", "field", "value"])
    p = report.profiles

    def cell(v: Any) -> Any:
        return "" if v is None else v

    for label, table, ps in (("best", report.best_table, p.best), ("last", report.last_table,
                                                                   p.last)):
        for t in p.tasks:
            for s in p.solvers:
                w.writerow([label, t, s, "score", cell(table.get(t, {}).get(s))])
                w.writerow([label, t, s, "ratio", ps.tasks[t].ratios[s]])
            w.writerow([label, t, "", "tau_max", ps.tasks[t].tau_max])
    for summary in report.summaries:
        for f in ("runs", "failed", "infra", "best_at_k", "last_at_k", "best_mean", "best_se",
                  "last_mean", "last_se"):
            w.writerow(["summary", summary.task, summary.solver, f, cell(getattr(summary, f))])
    w.writerow(["aup", "", "", "T", p.end])
    for row in p.aup_rows():
        w.writerow(["aup", "", row["solver"], "best_aup", row["best_aup"]])
        w.writerow(["aup", "", row["solver"], "last_aup", row["last_aup"]])
        have, total = report.coverage.get(str(row["solver"]), (len(p.tasks), len(p.tasks)))
        w.writerow(["aup", "", row["solver"], "tasks_covered", have])
    for label in ("best", "last"):
        for kind, ranks in p.positions[label].items():
            for s in p.rankings[label].get(kind) or sorted(ranks, key=lambda x: (ranks[x], x)):
                w.writerow([f"rank_{label}", "", s, kind, ranks[s]])
    for x in report.rates:
        for f in ("runs", "completion_rate", "improvement_rate", "normalized_at_k",
                  "normalized_mean", "rebench_at_k", "rebench_mean"):
            w.writerow(["rates", x.task, x.solver, f, cell(getattr(x, f))])
        for sid, done in x.subtask_completion.items():
            w.writerow(["subtask_rates", f"{x.task}/{sid}", x.solver, "completion_rate", done])
            w.writerow(["subtask_rates", f"{x.task}/{sid}", x.solver, "best",
                        cell(x.subtask_best.get(sid))])
            w.writerow(["subtask_rates", f"{x.task}/{sid}", x.solver, "normalized_at_k",
                        cell(x.subtask_normalized_at_k.get(sid))])
    for y in report.solver_rates:
        for f in ("tasks", "tasks_run", "runs", "completion_rate", "improvement_rate",
                  "normalized_at_k", "normalized_tasks", "rebench_at_k", "rebench_tasks"):
            w.writerow(["rates_summary", "", y.solver, f, cell(getattr(y, f))])
    for run in report.pending:
        w.writerow(["pending", cell(run.task), cell(run.solver), run.state, run.path])
    for flag in report.flagged:
        w.writerow(["flagged", flag.task, flag.solver, "excluded" if flag.excluded else "scored",
                    f"{flag.path} ({' '.join(flag.kinds)})"])
    return buf.getvalue()


def plot_profiles(report: ScoreReport, path: Path | str) -> Path:
    """Write the best-attempt and last-submission profiles as one figure (PNG, SVG
    or PDF by the file's suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    p = report.profiles
    order = [str(r["solver"]) for r in p.aup_rows()]
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", "-."]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    panels = (("Best attempt", p.best), ("Last submission", p.last))
    handles: list[Any] = []
    for ax, (title, ps) in zip(axes, panels, strict=True):
        handles = []
        for i, solver in enumerate(order):
            is_base = solver == report.baseline
            (line,) = ax.step(p.tau, ps.profiles[solver], where="post",
                              color="black" if is_base else cmap(i % cmap.N),
                              linestyle=":" if is_base else styles[(i // cmap.N) % len(styles)],
                              linewidth=2.2 if is_base else 1.8, clip_on=False)
            handles.append(line)
        ax.set_title(f"{title} profile (best of k runs)")
        ax.set_xlabel("τ: log10 of the performance ratio")
        ax.set_xlim(0, p.end)
        ax.set_ylim(0, 1.02)  # a fraction: never below 0 (the lines are not clipped there)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("fraction of tasks with log10 ratio ≤ τ")
    labels = [f"{s}  {p.best.aup[s]:.3f} / {p.last.aup[s]:.3f}" for s in order]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               title="solver  Best / Last AUP", title_fontsize=8, frameon=False)
    n = len(p.tasks)
    fig.suptitle(f"Performance profiles over {n} task{'s' if n != 1 else ''} "
                 f"(higher is better; AUP maximum = T = {p.end:g})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return path

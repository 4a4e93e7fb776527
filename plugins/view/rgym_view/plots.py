"""``rgym analyze``'s plots (matplotlib, PNG and SVG), like MLGym's analyses: the
action mix and the endings per solver (stacked bars), the action mix over the
episode (by tenth of its steps, one panel per solver and task), the failure modes
per solver, and the cost against the improvement over the baseline per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_view.analysis import ACTION_CLASSES, FAILURE_MODES, PHASES, AnalysisReport

#: Panels of the action-mix-over-the-episode figure (one per solver and task).
MAX_PHASE_PANELS = 12

_COLOURS = ["#2f5fd0", "#e07b39", "#3a9d5d", "#c43c3c", "#8a63d2", "#8c564b", "#d4a017", "#17becf",
            "#7f7f7f", "#bcbd22"]


def _label(task: str, solver: str, many_tasks: bool) -> str:
    return f"{solver}\n{task}" if many_tasks else solver


def _save(fig: Any, folder: Path, name: str) -> list[Path]:
    out = []
    for ext in ("png", "svg"):
        path = folder / f"{name}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        out.append(path)
    return out


def _from_zero(ax: Any, values: list[float]) -> None:
    """Start the x axis at 0 for non-negative data (matplotlib's autoscale centres
    all-zero data on 0, running the axis negative); all zeros span 0 to 1."""
    if values and min(values) >= 0:
        ax.set_xlim(left=0, right=None if max(values) > 0 else 1)


def _stacked(ax: Any, labels: list[str], series: dict[str, list[float]], xlabel: str) -> None:
    left = [0.0] * len(labels)
    for i, (name, values) in enumerate(series.items()):
        ax.barh(labels, values, left=left, color=_COLOURS[i % len(_COLOURS)], label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel(xlabel)
    _from_zero(ax, [v for values in series.values() for v in values] + left)
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=min(len(series), 7), fontsize=8,
              frameon=False)


def write_plots(report: AnalysisReport, folder: Path | str) -> list[Path]:
    """Write the plots into ``folder``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    groups = report.groups
    many = len({g.task for g in groups}) > 1
    labels = [_label(g.task, g.solver, many) for g in groups]
    height = max(2.5, 0.55 * len(groups) + 1.6)

    fig, ax = plt.subplots(figsize=(9, height))
    _stacked(ax, labels, {k: [g.action_share[k] * 100 for g in groups] for k in ACTION_CLASSES},
             "share of steps (%)")
    ax.set_title("Action mix")
    written += _save(fig, folder, "action_mix")
    plt.close(fig)

    statuses = sorted({s for g in groups for s in g.statuses})
    fig, ax = plt.subplots(figsize=(9, height))
    _stacked(ax, labels, {s: [float(g.statuses.get(s, 0)) for g in groups] for s in statuses}, "runs")
    ax.set_title("How episodes ended")
    written += _save(fig, folder, "endings")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, height))
    _stacked(ax, labels, {m: [float(g.modes.get(m, 0)) for g in groups] for m in FAILURE_MODES},
             "runs showing the failure mode")
    ax.set_title("Failure modes")
    written += _save(fig, folder, "failure_modes")
    plt.close(fig)

    shown = groups[:MAX_PHASE_PANELS]
    cols = min(3, len(shown)) or 1
    rows = (len(shown) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows + 0.8), squeeze=False, sharey=True)
    # each tenth as a flat block: x runs 0, 10, 10, 20, 20, ... 100, each value twice
    edges = [x * 100 / PHASES for t in range(PHASES) for x in (t, t + 1)]
    colours = [_COLOURS[i % len(_COLOURS)] for i in range(len(ACTION_CLASSES))]
    for n, g in enumerate(shown):
        ax = axes[n // cols][n % cols]
        shares = g.phase_shares()
        # one stacked area per class (7 shapes a panel, cheap to draw even for many panels)
        ax.stackplot(edges, *[[shares[t][k] * 100 for t in range(PHASES) for _ in (0, 1)]
                              for k in ACTION_CLASSES],
                     colors=colours, labels=list(ACTION_CLASSES) if n == 0 else (), linewidth=0)
        ax.set_title(_label(g.task, g.solver, many).replace("\n", " · "), fontsize=9)
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 100)
        ax.set_xlabel("episode progress (% of its steps)", fontsize=7)
        ax.tick_params(labelsize=7)
    for n in range(len(shown), rows * cols):
        axes[n // cols][n % cols].axis("off")
    for row in axes:
        row[0].set_ylabel("share of steps (%)")
    fig.suptitle("Action mix over the episode (by tenth of its steps)"
                 + (f", first {MAX_PHASE_PANELS} of {len(groups)}" if len(groups) > len(shown) else ""))
    fig.legend(loc="lower center", ncol=len(ACTION_CLASSES), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    written += _save(fig, folder, "action_phases")
    plt.close(fig)

    points = [r for r in report.runs if r.improvement_pct is not None]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    solvers = sorted({r.solver for r in points})
    for i, solver in enumerate(solvers):
        mine = [r for r in points if r.solver == solver]
        ax.scatter([r.cost_usd for r in mine], [r.improvement_pct for r in mine], label=solver,
                   color=_COLOURS[i % len(_COLOURS)], alpha=0.8)
    ax.axhline(0, color="#999999", linewidth=0.8, linestyle="--")
    costs = [r.cost_usd for r in points]
    _from_zero(ax, costs)
    if costs and max(costs) > 0:  # room on the right for the costliest point
        ax.set_xlim(0, max(costs) * 1.05)
    ax.set_xlabel("model cost (USD)")
    ax.set_ylabel("improvement over the baseline (%)")
    ax.set_title("Cost against improvement (one point per run)")
    if solvers:
        ax.legend(fontsize=8, frameon=False)
    written += _save(fig, folder, "cost_improvement")
    plt.close(fig)
    return written

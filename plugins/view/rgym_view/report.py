"""``rgym report``: one self-contained results page from runs or a sweep.

The numbers are the scoring protocol's (:func:`rgym_core.scoring.score_runs`,
the same ones ``rgym score --format json`` prints): the leaderboard by Best AUP
(competition ranks: equal values share a rank), MLGym's best-attempt and
last-submission performance profiles, per-task tables with the mean and
standard error over runs, ResearchGym's completion, improvement and normalised
scores, and the baseline set each task used.  Beside them, per run: cost against
score, AUP against cost (as in MLGym's paper), the integrity monitor's verdict
(``integrity.json``), whether the run's records are broken
(:func:`rgym_core.run_problem`), and a link to the run's folder (or to its page
in the viewer, with ``--viewer``).

The page is one HTML file: plots are matplotlib SVG images inside ``data:`` URIs,
the styles inline, no script, nothing fetched from the network.  Every string
that comes from a run (task, agent, model and tag names, findings, paths) is
escaped.  ``--format markdown`` gives the leaderboard and the per-task tables as
a README-ready Markdown table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgym_core import RunDir, run_problem, safe_summary
from rgym_view.runs import iter_runs

__all__ = ["build_report", "render_html", "render_markdown", "write_figures"]

#: Panels of the cost-against-score figure (one per task).
MAX_TASK_PANELS = 12
_COLOURS = ["#2f5fd0", "#e07b39", "#3a9d5d", "#c43c3c", "#8a63d2", "#8c564b", "#d4a017", "#17becf",
            "#7f7f7f", "#bcbd22"]


# --------------------------------------------------------------------------- data


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _solver_of(agent: str | None, model: str | None, solvers: set[str], baseline: str) -> str | None:
    """The scoring protocol's solver name of a run (agent short name, ``/`` and the
    model with its slashes as ``_``; a solver named like the baseline carries
    ``-agent``, as ``rgym score`` shows it)."""
    if not agent:
        return None
    short = agent.rsplit("/", 1)[-1]
    name = f"{short}/{model.replace('/', '_')}" if model else short
    if name in (baseline, "reference") and f"{name}-agent" in solvers:
        return f"{name}-agent"
    return name


def _integrity(run: RunDir, summary: dict[str, Any] | None) -> dict[str, Any]:
    """The integrity monitor's verdict on a run: ``state`` (``flagged``, ``review``,
    ``clean``, ``not checked``, ``unreadable``), its kinds and first findings."""
    path = run.path / "integrity.json"
    report: Any = None
    if path.is_file():
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return {"state": "unreadable", "kinds": [], "findings": [],
                    "problem": f"{path}: cannot be read: {exc}"}
    source = report if isinstance(report, dict) else summary
    if not isinstance(source, dict):
        return {"state": "not checked", "kinds": [], "findings": []}
    findings = [f for f in source.get("findings") or [] if isinstance(f, dict)]
    kinds = [str(k) for k in source.get("kinds") or []]
    state = "flagged" if source.get("flagged") else "review" if source.get("review") else "clean"
    shown = [{"kind": str(f.get("kind", "")), "severity": str(f.get("severity", "")),
              "message": str(f.get("message", ""))[:400]}
             for f in findings if f.get("severity") in ("error", "warning")][:5]
    return {"state": state, "kinds": kinds, "findings": shown,
            "file": "integrity.json" if isinstance(report, dict) else "result.json"}


def build_report(paths: Sequence[Path], *, exclude_flagged: bool = False,
                 title: str | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data: ``score`` (``rgym score --format
    json``'s data), ``runs`` (one row per run directory), ``solvers`` (cost per
    solver) and the page's ``title``.  Raises the scoring protocol's
    ``InputError`` when no run has a readable result."""
    from rgym_core.scoring import score_runs

    scored = score_runs(paths, exclude_flagged=exclude_flagged)
    data = scored.to_data()
    solvers = set(data["solvers"])
    task_names = {t["task"] for t in data["tasks"]}
    runs: list[dict[str, Any]] = []
    for index, run in enumerate(iter_runs(paths)):
        row: dict[str, Any]
        try:
            s = safe_summary(run)
            row = {"id": index, "path": str(run.path),
                   "task": s.task_label if s.task_label in task_names else s.task,
                   "agent": s.agent, "model": s.model, "seed": s.seed, "state": s.state,
                   "status": s.status, "score": _finite(s.score), "metric": s.primary_metric,
                   "cost_usd": _finite(s.cost_usd) or 0.0, "steps": s.steps,
                   "tokens": (s.input_tokens or 0) + (s.output_tokens or 0),
                   "problem": s.problem or run_problem(run), "integrity": _integrity(run, s.integrity),
                   "solver": _solver_of(s.agent, s.model, solvers, data["baseline"])}
        except Exception as exc:  # noqa: BLE001 - a run the checks missed: shown broken, not fatal
            row = {"id": index, "path": str(run.path), "task": None, "agent": None, "model": None,
                   "seed": None, "state": "corrupt", "status": None, "score": None, "metric": None,
                   "cost_usd": 0.0, "steps": 0, "tokens": 0, "solver": None,
                   "problem": f"{run.path}: cannot be read: {type(exc).__name__}: {str(exc)[:300]}",
                   "integrity": {"state": "not checked", "kinds": [], "findings": []}}
        runs.append(row)
    costs: dict[str, list[float]] = defaultdict(list)
    flagged: dict[str, int] = defaultdict(int)
    for row in runs:
        if row["solver"] in solvers and not row["problem"]:
            if row["integrity"]["state"] == "flagged":
                flagged[row["solver"]] += 1
                if exclude_flagged:
                    continue
            costs[row["solver"]].append(row["cost_usd"])
    per_solver = {s: {"runs": len(costs[s]), "cost_total": math.fsum(costs[s]),
                      "cost_mean": math.fsum(costs[s]) / len(costs[s]) if costs[s] else None,
                      "flagged": flagged[s]} for s in data["solvers"]}
    sources = ", ".join(str(p) for p in paths)
    return {"title": title or f"rgym results: {sources}", "sources": [str(p) for p in paths],
            "generated": time.time(), "score": data, "runs": runs, "solvers": per_solver,
            "exclude_flagged": exclude_flagged}


# --------------------------------------------------------------------------- figures


def _plain(text: Any, limit: int = 48) -> str:
    """A name as a plot label: one line, no mathtext (``$``), at most ``limit`` characters."""
    one = " ".join(str(text).split()).replace("$", r"\$")
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _svg_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """The page's matplotlib figures (open ``Figure`` objects), by name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = report["score"]
    order = [str(r["solver"]) for r in data["aup"]]
    colour = {s: _COLOURS[i % len(_COLOURS)] for i, s in enumerate(order)}
    baseline = data["baseline"]
    figs: dict[str, Any] = {}

    prof = data["profile"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (label, key) in zip(axes, (("Best attempt", "best"), ("Last submission", "last")), strict=True):
        aup = {r["solver"]: r[f"{key}_aup"] for r in data["aup"]}
        for s in order:
            is_base = s == baseline
            ax.step(prof["tau"], prof[key]["profiles"][s], where="post",
                    color="black" if is_base else colour[s], linestyle=":" if is_base else "-",
                    linewidth=2.0, label=f"{_plain(s)} ({aup[s]:.3f})")
        ax.set_title(f"{label} profile")
        ax.set_xlabel("τ (log10 of the performance ratio)")
        ax.set_xlim(0, prof["T"])
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, frameon=False, title="solver (AUP)", title_fontsize=7, loc="lower right")
    axes[0].set_ylabel("fraction of tasks")
    fig.tight_layout()
    figs["profiles"] = fig

    per = report["solvers"]
    points = [(s, per[s]["cost_mean"], r["best_aup"]) for s, r in ((r["solver"], r) for r in data["aup"])
              if s != baseline and per.get(s, {}).get("cost_mean") is not None]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for s, cost, aup in points:
        ax.scatter([cost], [aup], color=colour[s], s=40, clip_on=False)
        ax.annotate(_plain(s, 32), (cost, aup), textcoords="offset points", xytext=(5, 4), fontsize=7)
    base_aup = next((r["best_aup"] for r in data["aup"] if r["solver"] == baseline), None)
    if base_aup is not None:
        ax.axhline(base_aup, color="#999999", linestyle="--", linewidth=0.8, label="baseline")
        ax.legend(fontsize=7, frameon=False)
    ax.set_xlim(left=0, right=max([c for _, c, _ in points] + [0]) * 1.15 or 1)
    ax.set_xlabel("mean model cost per run (USD)")
    ax.set_ylabel("Best AUP")
    ax.set_title("AUP against cost (one point per solver)")
    ax.grid(True, alpha=0.3)
    figs["aup_cost"] = fig

    tasks = [t["task"] for t in data["tasks"]][:MAX_TASK_PANELS]
    cols = min(3, len(tasks)) or 1
    rows = (len(tasks) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for n, task in enumerate(tasks):
        ax = axes[n // cols][n % cols]
        mine = [r for r in report["runs"] if r["task"] == task and r["score"] is not None and not r["problem"]
                and not (report["exclude_flagged"] and r["integrity"]["state"] == "flagged")]
        for s in sorted({r["solver"] for r in mine if r["solver"]}):
            for flagged in (False, True):
                pts = [r for r in mine if r["solver"] == s and (r["integrity"]["state"] == "flagged") == flagged]
                if pts:
                    ax.scatter([r["cost_usd"] for r in pts], [r["score"] for r in pts], s=30, alpha=0.85,
                               color=colour.get(s, "#555555"), clip_on=False, marker="x" if flagged else "o",
                               label=_plain(s, 28) + (" (flagged)" if flagged else ""))
        info = next(t for t in data["tasks"] if t["task"] == task)
        if info.get("baseline") is not None:
            ax.axhline(info["baseline"], color="#999999", linestyle="--", linewidth=0.8)
        ax.set_title(_plain(task, 40), fontsize=9)
        ax.set_xlabel("model cost (USD)", fontsize=8)
        ax.set_ylabel(_plain(info.get("metric") or "score", 24) + (" ↓" if info["direction"] == "minimize" else ""),
                      fontsize=8)
        ax.set_xlim(left=0)
        ax.tick_params(labelsize=7)
        if mine:
            ax.legend(fontsize=6, frameon=False)
    for n in range(len(tasks), rows * cols):
        axes[n // cols][n % cols].axis("off")
    fig.suptitle("Cost against score (one point per run; × flagged; dashed: baseline)", fontsize=10)
    fig.tight_layout()
    figs["cost_score"] = fig
    return figs


def write_figures(report: dict[str, Any], folder: Path | None = None) -> dict[str, str]:
    """The figures as ``data:`` URIs (SVG), by name; also written into ``folder``
    as PNG and SVG files when it is given."""
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    for name, fig in _figures(report).items():
        out[name] = _svg_uri(fig)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            for ext in ("png", "svg"):
                fig.savefig(folder / f"{name}.{ext}", dpi=130, bbox_inches="tight")
        plt.close(fig)
    return out


# --------------------------------------------------------------------------- HTML

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1320px;
color:#1d232b;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde2e8}
h3{font-size:15px;margin:18px 0 6px}.muted{color:#66707c;font-size:12px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}th,td{padding:4px 9px;
border-bottom:1px solid #e6e9ee;text-align:left;vertical-align:top}th{background:#f4f6f8}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.flagged{color:#b3261e;font-weight:600}.review{color:#9a6700}.clean{color:#2f7d32}
.broken{color:#b3261e}.tie{color:#66707c;font-size:11px}img{max-width:100%;height:auto}
.finding{font-size:12px;color:#444;max-width:520px;white-space:pre-wrap;word-break:break-word}
code{font-size:12px;word-break:break-all}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    v = float(value)
    return f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.3g}"


def _cell(value: Any, field: str, digits: int = 3, extra: str = "") -> str:
    """A number cell; ``data-field`` and ``data-value`` hold the exact figure."""
    raw = "" if value is None else repr(float(value))
    return (f'<td class="n" data-field="{_e(field)}" data-value="{_e(raw)}">'
            f"{_num(value, digits)}{extra}</td>")


def _pm(mean: Any, se: Any, field: str) -> str:
    raw_m = "" if mean is None else repr(float(mean))
    raw_s = "" if se is None else repr(float(se))
    shown = "-" if mean is None else _num(mean) + ("" if se is None else f" ± {_num(se)}")
    return (f'<td class="n" data-field="{_e(field)}" data-mean="{_e(raw_m)}" data-se="{_e(raw_s)}">'
            f"{shown}</td>")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.0f}%"


def _href(target: Path, page: Path) -> str:
    """A relative link from ``page`` to ``target`` (percent-encoded: no scheme, no markup)."""
    try:
        rel = os.path.relpath(target.resolve(), page.resolve().parent)
    except ValueError:
        rel = str(target.resolve())
    return urllib.parse.quote(Path(rel).as_posix(), safe="/")


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(stamp))


def _integrity_cell(row: dict[str, Any]) -> str:
    if row["problem"]:
        return f'<td class="broken" data-integrity="broken">broken<div class="finding">{_e(row["problem"])}</div></td>'
    info = row["integrity"]
    state = info["state"]
    css = {"flagged": "flagged", "review": "review", "clean": "clean"}.get(state, "muted")
    parts = [f'<td class="{css}" data-integrity="{_e(state)}">{_e(state)}']
    if info.get("kinds"):
        parts.append(f'<div class="finding">{_e(", ".join(info["kinds"]))}</div>')
    for f in info.get("findings") or []:
        parts.append(f'<div class="finding">{_e(f["severity"])}: {_e(f["message"])}</div>')
    if info.get("problem"):
        parts.append(f'<div class="finding">{_e(info["problem"])}</div>')
    parts.append("</td>")
    return "".join(parts)


def render_html(report: dict[str, Any], figures: dict[str, str], *, page: Path,
                viewer: Path | None = None) -> str:
    """The page (see the module docstring); links are relative to ``page``'s folder."""
    data = report["score"]
    baseline = data["baseline"]
    per = report["solvers"]
    ranks = data["rank_positions"]
    aup_rank_count: dict[int, int] = defaultdict(int)
    for r in data["aup"]:
        aup_rank_count[r["rank"]] += 1
    out: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>{_e(report['title'])}</title><style>{CSS}</style></head><body>",
                      f"<h1>{_e(report['title'])}</h1>",
                      f'<p class="muted">Generated {_e(_when(report["generated"]))}'
                      f" by rgym report from {_e(', '.join(report['sources']))}: {len(data['tasks'])} task(s), "
                      f"{len(data['solvers'])} solver(s), {len(report['runs'])} run folder(s)."
                      + (" Runs the integrity monitor flagged are left out of every figure."
                         if report["exclude_flagged"] else "") + "</p>"]

    out.append('<h2 id="leaderboard">Leaderboard</h2>')
    out.append('<p class="muted">Ranked by Best AUP (area under the best-attempt performance profile, '
               f"maximum T = {_e(_num(data['profile']['T']))}); equal AUPs share a rank. Mean rank and Borda "
               "rank are over tasks, best attempts. Cost: model cost per run.</p>")
    out.append('<table id="leaderboard-table"><thead><tr><th>rank</th><th>solver</th><th>Best AUP</th>'
               "<th>Last AUP</th><th>mean-rank rank</th><th>Borda rank</th><th>tasks with a score</th>"
               "<th>runs</th><th>mean cost</th><th>total cost</th><th>flagged runs</th></tr></thead><tbody>")
    for r in data["aup"]:
        s = str(r["solver"])
        tie = ' <span class="tie">(tie)</span>' if aup_rank_count[r["rank"]] > 1 else ""
        info = per.get(s, {})
        is_base = s == baseline
        out.append(f'<tr data-solver="{_e(s)}"><td class="n" data-field="rank" data-value="{r["rank"]}">'
                   f'{r["rank"]}{tie}</td><td>{_e(s)}{" (task baseline)" if is_base else ""}</td>'
                   + _cell(r["best_aup"], "best_aup") + _cell(r["last_aup"], "last_aup")
                   + f'<td class="n">{_e(ranks["best"]["mean_rank"].get(s, "-"))}</td>'
                   + f'<td class="n">{_e(ranks["best"]["borda"].get(s, "-"))}</td>'
                   + f'<td class="n">{r["tasks_covered"]}/{r["tasks_total"]}</td>'
                   + f'<td class="n">{"-" if is_base else info.get("runs", 0)}</td>'
                   + ("<td class=\"n\">-</td><td class=\"n\">-</td>" if is_base else
                      _cell(info.get("cost_mean"), "cost_mean", 4) + _cell(info.get("cost_total"), "cost_total", 4))
                   + f'<td class="n">{"-" if is_base else info.get("flagged", 0)}</td></tr>')
    out.append("</tbody></table>")
    for line in data["notes"] + [f"warning: {w}" for w in data["warnings"]]:
        out.append(f'<p class="muted">{_e(line)}</p>')

    out.append('<h2 id="profiles">Performance profiles</h2>')
    out.append('<p class="muted">For each solver, the fraction of tasks on which its log10 performance '
               "ratio to the best solver is at most τ (MLGym's profiles; best attempt and last submission, "
               "best of k runs).</p>")
    out.append(f'<img id="fig-profiles" alt="performance profiles" src="{figures["profiles"]}">')
    out.append('<h2 id="cost">Cost</h2>')
    out.append(f'<img id="fig-aup-cost" alt="AUP against cost" src="{figures["aup_cost"]}">')
    out.append(f'<img id="fig-cost-score" alt="cost against score" src="{figures["cost_score"]}">')

    out.append('<h2 id="tasks">Per task</h2>')
    out.append('<p class="muted">Best@k and Last@k: the best over runs of the best attempt and of the last '
               "submission; mean ± standard error (std with ddof=1 over √n) over the runs with a valid score. "
               "failed: runs without a valid score; infra: runs the infrastructure ended (not scored).</p>")
    rates = {(x["task"], x["solver"]): x for x in data["rates"]}
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for summary in data["summaries"]:
        by_task[summary["task"]].append(summary)
    for n, t in enumerate(data["tasks"]):
        task = t["task"]
        arrow = "lower is better" if t["direction"] == "minimize" else "higher is better"
        base = "-" if t.get("baseline") is None else _num(t["baseline"], 4)
        out.append(f'<h3 id="task-{n}">{_e(task)}</h3><p class="muted">metric {_e(t.get("metric"))} '
                   f"({arrow}); baseline {_e(base)}"
                   + (f" ({_e(t.get('baseline_kind'))}: {_e(t.get('baseline_source'))})"
                      if t.get("baseline_kind") else "") + "</p>")
        out.append(f'<table class="task-table" data-task="{_e(task)}"><thead><tr><th>solver</th><th>runs</th>'
                   "<th>failed</th><th>infra</th><th>Best@k</th><th>best mean ± SE</th><th>Last@k</th>"
                   "<th>last mean ± SE</th><th>completed</th><th>improved</th><th>norm@k</th></tr></thead><tbody>")
        for sm in sorted(by_task.get(task, []), key=lambda x: x["solver"]):
            rt = rates.get((task, sm["solver"])) or {}
            out.append(f'<tr data-solver="{_e(sm["solver"])}"><td>{_e(sm["solver"])}</td>'
                       f'<td class="n" data-field="runs" data-value="{sm["runs"]}">{sm["runs"]}</td>'
                       f'<td class="n">{sm["failed"]}</td><td class="n">{sm["infra"]}</td>'
                       + _cell(sm["best_at_k"], "best_at_k", 4) + _pm(sm["best_mean"], sm["best_se"], "best")
                       + _cell(sm["last_at_k"], "last_at_k", 4) + _pm(sm["last_mean"], sm["last_se"], "last")
                       + f'<td class="n">{_pct(rt.get("completion_rate"))}</td>'
                       + f'<td class="n">{_pct(rt.get("improvement_rate"))}</td>'
                       + _cell(rt.get("normalized_at_k"), "normalized_at_k") + "</tr>")
        out.append("</tbody></table>")

    if data["rates_summary"]:
        out.append('<h2 id="researchgym">ResearchGym over all tasks</h2><table id="rates-table"><thead><tr>'
                   "<th>solver</th><th>tasks run</th><th>runs</th><th>completed</th><th>improved</th>"
                   "<th>norm@k mean</th><th>RE@k mean</th></tr></thead><tbody>")
        for y in data["rates_summary"]:
            out.append(f'<tr data-solver="{_e(y["solver"])}"><td>{_e(y["solver"])}</td>'
                       f'<td class="n">{y["tasks_run"]}/{y["tasks"]}</td><td class="n">{y["runs"]}</td>'
                       f'<td class="n">{_pct(y["completion_rate"])}</td>'
                       f'<td class="n">{_pct(y["improvement_rate"])}</td>'
                       + _cell(y["normalized_at_k"], "normalized_at_k") + _cell(y["rebench_at_k"], "rebench_at_k")
                       + "</tr>")
        out.append("</tbody></table>")

    out.append('<h2 id="runs">Runs</h2><p class="muted">Integrity: the monitor\'s verdict (integrity.json); '
               "broken: the run's records are malformed (the line names the file and the field); "
               "not checked: no monitor ran.</p>")
    out.append('<table id="runs-table"><thead><tr><th>task</th><th>solver</th><th>seed</th><th>status</th>'
               "<th>score</th><th>cost</th><th>steps</th><th>integrity</th><th>trajectory</th></tr></thead><tbody>")
    for row in report["runs"]:
        link_target = (f"{_href(viewer, page)}#run={row['id']}" if viewer is not None
                       else _href(Path(row["path"]), page) + "/")
        label = "viewer" if viewer is not None else "run folder"
        out.append(f'<tr class="run" data-run="{row["id"]}" data-path="{_e(row["path"])}">'
                   f"<td>{_e(row['task'] or '?')}</td><td>{_e(row['solver'] or row['agent'] or '?')}</td>"
                   f'<td class="n">{_e(row["seed"] if row["seed"] is not None else "-")}</td>'
                   f"<td>{_e(row['status'] or row['state'])}</td>"
                   + _cell(row["score"], "score", 4) + _cell(row["cost_usd"], "cost_usd", 4)
                   + f'<td class="n">{row["steps"]}</td>' + _integrity_cell(row)
                   + f'<td><a href="{_e(link_target)}">{label}</a> <code>{_e(row["path"])}</code></td></tr>')
    out.append("</tbody></table></body></html>")
    return "\n".join(out)


# --------------------------------------------------------------------------- Markdown


def _md(text: Any) -> str:
    """A Markdown table cell: one line, ``|`` escaped, no raw HTML."""
    one = " ".join(str("" if text is None else text).split())
    return html.escape(one, quote=False).replace("|", "\\|").replace("`", "\\`")


def render_markdown(report: dict[str, Any]) -> str:
    """The leaderboard and the per-task tables as README-ready Markdown."""
    data = report["score"]
    per = report["solvers"]
    counts: dict[int, int] = defaultdict(int)
    for r in data["aup"]:
        counts[r["rank"]] += 1
    lines = ["| rank | solver | Best AUP | Last AUP | tasks | runs | mean cost (USD) | flagged |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in data["aup"]:
        s = str(r["solver"])
        info = per.get(s, {})
        base = s == data["baseline"]
        tie = "=" if counts[r["rank"]] > 1 else ""
        lines.append(f"| {r['rank']}{tie} | {_md(s)}{' (baseline)' if base else ''} | {r['best_aup']:.3f} | "
                     f"{r['last_aup']:.3f} | {r['tasks_covered']}/{r['tasks_total']} | "
                     f"{'-' if base else info.get('runs', 0)} | "
                     f"{'-' if base else _num(info.get('cost_mean'), 4)} | {'-' if base else info.get('flagged', 0)} |")
    lines += ["", f"AUP: area under MLGym's performance profiles (maximum {data['profile']['T']:g}); "
              "equal ranks (=) are ties.", ""]
    lines += ["| task | solver | runs | Best@k | best mean ± SE | Last@k | last mean ± SE |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]

    def pm(mean: Any, se: Any) -> str:
        return "-" if mean is None else _num(mean) + ("" if se is None else f" ± {_num(se)}")

    for sm in sorted(data["summaries"], key=lambda x: (x["task"], x["solver"])):
        lines.append(f"| {_md(sm['task'])} | {_md(sm['solver'])} | {sm['runs']} | {_num(sm['best_at_k'], 4)} | "
                     f"{pm(sm['best_mean'], sm['best_se'])} | {_num(sm['last_at_k'], 4)} | "
                     f"{pm(sm['last_mean'], sm['last_se'])} |")
    flagged = [r for r in report["runs"] if r["integrity"]["state"] == "flagged"]
    broken = [r for r in report["runs"] if r["problem"]]
    if flagged or broken:
        lines.append("")
        lines.append(f"{len(flagged)} run(s) flagged by the integrity monitor, {len(broken)} broken run(s)"
                     + (" (flagged runs left out of the figures)." if report["exclude_flagged"] else "."))
    return "\n".join(lines) + "\n"

"""``rgym runs [PATH]`` and ``rgym show RUN_DIR``: past runs, listed and summarised.

Each run is one :class:`~rgym_core.runs.RunSummary` (:mod:`rgym_core.runs`); a
broken run is listed with its problem, and the other runs as usual.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from rgym_core.commands.table import format_table
from rgym_core.runcheck import broken_line, record_problem
from rgym_core.rundir import TRAJECTORY_FILE, RunDir, RunDirError, iter_numbered_records
from rgym_core.runs import RunSummary, iter_summaries, summarize

__all__ = ["filter_runs", "parse_since", "runs", "runs_table", "score_text", "show_run"]


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, *, now: float | None = None) -> float:
    """A time stamp from ``30m``, ``2h``, ``3d``, ``1w`` (that long ago), ``today``,
    ``yesterday``, or a date/time ``2026-11-30``, ``2026-11-30T14:00`` (local time)."""
    now = time.time() if now is None else now
    text = text.strip()
    match = _RELATIVE.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    if text in ("today", "yesterday"):
        day = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return day.timestamp() - (86400 if text == "yesterday" else 0)
    try:
        return datetime.fromisoformat(text.replace(" ", "T")).timestamp()
    except ValueError:
        raise ValueError(f"--since: cannot read {text!r}; give a duration (30m, 2h, 3d, 1w), "
                         "today, yesterday, or a date such as 2026-11-30 or 2026-11-30T14:00") from None


def _glob(pattern: str, *values: str | None) -> bool:
    """Case-insensitive glob match of ``pattern`` against any of ``values``; a pattern
    without wildcards matches as a substring."""
    pattern = pattern.lower()
    if not any(ch in pattern for ch in "*?["):
        pattern = f"*{pattern}*"
    return any(v is not None and fnmatch.fnmatchcase(v.lower(), pattern) for v in values)


#: ``--status`` words that are not exit statuses.
STATUS_WORDS = {
    "complete": "the run wrote its result", "running": "still going",
    "incomplete": "killed before it wrote a result (`rgym grade` finishes it)",
    "corrupt": "result.json cannot be read", "graded": "a valid final score",
    "failed": "no valid final score", "flagged": "the integrity monitor found an error",
    "infra": "rgym or the machine ended the episode",
    "broken": "a malformed result.json or trajectory (`rgym runs` names the field)",
}


def _status_matches(s: RunSummary, word: str) -> bool:
    word = word.strip().lower()
    if word in ("complete", "running", "incomplete", "corrupt"):
        return s.state == word
    if word == "graded":
        return s.score is not None
    if word == "failed":
        return s.state != "running" and s.score is None
    if word == "flagged":
        return s.flagged
    if word == "infra":
        return s.infrastructure
    if word == "broken":
        return s.problem is not None
    return _glob(word, s.status, s.end_reason)


def filter_runs(summaries: Iterable[RunSummary], *, task: Sequence[str] = (),
                agent: Sequence[str] = (), model: Sequence[str] = (),
                status: Sequence[str] = (), since: float | None = None) -> list[RunSummary]:
    """The summaries that match every given filter (each filter: any of its values)."""
    out = []
    for s in summaries:
        if task and not any(_glob(p, s.task, s.task_label) for p in task):
            continue
        if agent and not any(_glob(p, s.agent, (s.agent or "").split("/")[-1]) for p in agent):
            continue
        if model and not any(_glob(p, s.model or "none") for p in model):
            continue
        if status and not any(_status_matches(s, w) for w in status):
            continue
        if since is not None and (s.started_at is None or s.started_at < since):
            continue
        out.append(s)
    return out


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def score_text(s: RunSummary) -> str:
    """``0.91 (base 0.87, +4.6%)``: the final primary score against the baseline."""
    if s.score is None:
        return "-"
    text = _num(s.score)
    if s.baseline is not None:
        delta = s.score - s.baseline
        if s.direction == "minimize":
            delta = -delta
        rel = f", {delta / abs(s.baseline) * 100:+.1f}%" if s.baseline else ""
        text += f" (base {_num(s.baseline)}{rel})"
    return text


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def _started(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _status_cell(s: RunSummary) -> str:
    if s.state != "complete":
        return s.state
    return s.status or "?"


def _integrity_cell(s: RunSummary) -> str:
    if s.integrity is None:
        return ""
    counts = s.integrity.get("counts") or {}
    if s.flagged:
        return "FLAGGED " + ",".join(s.integrity.get("kinds") or [])
    if s.integrity.get("review"):  # not flagged, but put up for a person to look at
        return "REVIEW " + ",".join(s.integrity.get("review_kinds") or [])
    warnings = int(counts.get("warning") or 0)
    return f"{warnings} warning{'s' if warnings != 1 else ''}" if warnings else "ok"


def runs_table(summaries: Sequence[RunSummary], base: Path | None = None) -> list[dict[str, str]]:
    """The rows ``rgym runs`` prints."""
    rows = []
    for s in summaries:
        path = Path(s.path)
        if base is not None:
            try:
                path = path.resolve().relative_to(base.resolve())
            except ValueError:
                pass
        rows.append({"started": _started(s.started_at), "task": s.task_label, "solver": s.solver,
                     "seed": "" if s.seed is None else str(s.seed), "status": _status_cell(s),
                     "score": score_text(s), "steps": str(s.steps),
                     "cost": f"${s.cost_usd:.4f}" if s.cost_usd else "",
                     "time": _duration(s.duration_s), "integrity": _integrity_cell(s),
                     "run_dir": str(path)})
    return rows


@click.command("runs")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--task", "tasks", multiple=True, metavar="GLOB",
              help="Only runs of these tasks (glob or substring; repeatable).")
@click.option("--agent", "agents", multiple=True, metavar="GLOB", help="Only runs of these agents.")
@click.option("--model", "models", multiple=True, metavar="GLOB",
              help="Only runs with these models ('none' for agents without one).")
@click.option("--status", "statuses", multiple=True, metavar="WORD",
              help="Only runs with this exit status (submitted, autosubmitted_*, evaluation_error...) "
                   "or state: " + ", ".join(STATUS_WORDS) + ".")
@click.option("--since", metavar="WHEN", help="Only runs started since: 30m, 2h, 3d, 1w, today, "
                                               "yesterday, or a date (2026-11-30[T14:00]).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of runs) for scripts.")
def runs(paths: tuple[Path, ...], tasks: tuple[str, ...], agents: tuple[str, ...],
         models: tuple[str, ...], statuses: tuple[str, ...], since: str | None,
         limit: int | None, as_json: bool) -> None:
    """List past runs (newest first) with their status, score, cost and duration.

    PATHS are run directories, runs folders or sweep folders (default: ./runs).
    """
    from rgym_core.cli import EXIT_USAGE

    try:
        since_ts = parse_since(since) if since else None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    targets = list(paths) or [Path("runs")]
    try:
        found = list(iter_summaries(targets))
    except RunDirError as exc:
        hint = "" if paths else " (give a runs folder: rgym runs PATH)"
        click.echo(f"error: {exc}{hint}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    selected = filter_runs(found, task=tasks, agent=agents, model=models, status=statuses,
                           since=since_ts)
    selected.sort(key=lambda s: (s.started_at or 0.0, s.path), reverse=True)
    if limit:
        selected = selected[:limit]
    for s in found:
        if s.problem:
            click.echo(f"warning: broken run: {s.problem}", err=True)
    if as_json:
        click.echo(json.dumps([s.to_dict() for s in selected], indent=2, default=str))
        return
    if not selected:
        what = "no runs" if not found else f"no runs match (of {len(found)})"
        click.echo(f"{what} under {', '.join(str(t) for t in targets)}")
        return
    base = targets[0] if len(targets) == 1 and targets[0].is_dir() else None
    columns = ["started", "task", "solver", "seed", "status", "score", "steps", "cost", "time",
               "integrity", "run_dir"]
    click.echo(format_table(runs_table(selected, base), columns))
    shown = f"{len(selected)} of {len(found)} runs" if len(selected) != len(found) else \
        f"{len(found)} run{'s' if len(found) != 1 else ''}"
    click.echo(f"\n{shown}; `rgym show RUN_DIR` for one, `rgym view PATH` to browse them.")


# --------------------------------------------------------------------------- rgym show RUN_DIR


def _sections(path: Path) -> list[dict[str, Any]]:
    """What plugins add about the run (``rgym_run_sections``), e.g. integrity findings."""
    try:
        from rgym_core.cli import get_registry

        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            registry = get_registry(ctx)
        else:
            from rgym_core.registry import load_registry

            registry = load_registry(lazy=True)
        answers = registry.call_hook("rgym_run_sections", run_dir=path)
    except Exception as exc:  # noqa: BLE001 - a plugin failing must not hide the run
        return [{"title": "plugins", "lines": [f"could not ask plugins: {exc}"], "data": {}}]
    out: list[dict[str, Any]] = []
    for answer in answers:
        for section in answer or []:
            if isinstance(section, dict) and section.get("title"):
                out.append(section)
    return out


def run_details(path: Path) -> dict[str, Any]:
    """Everything ``rgym show RUN_DIR`` prints, as data."""
    run = RunDir(path)
    summary = summarize(run)
    data: dict[str, Any] = {"summary": summary.to_dict(), "validations": [], "final": None,
                            "end": None}
    gradings: list[dict[str, Any]] = []
    stops: list[dict[str, Any]] = []
    try:
        for line, record in iter_numbered_records(run.trajectory_path):
            bad = record_problem(record)
            if bad is not None:
                data["trajectory_error"] = broken_line(run, f"{TRAJECTORY_FILE} line {line}", bad)
                break
            kind = record.get("type")
            if kind == "score":
                gradings.append(record.get("score") or {})
            elif kind in ("agent_stop", "error", "hook_error", "grading_interrupted",
                          "archive_error", "cleanup_error"):
                stops.append({k: v for k, v in record.items() if k != "traceback"})
    except RunDirError as exc:
        data["trajectory_error"] = str(exc)
    data["validations"] = [g for g in gradings if g.get("kind") == "validate"]
    finals = [g for g in gradings if g.get("kind") in ("submit", "autosubmit")]
    data["final"] = finals[-1] if finals else None
    data["events"] = stops
    if summary.state == "complete":
        r = run.result()
        data["end"] = {"status": str(r.status), "end_reason": str(r.end_reason or ""),
                       "why": r.end_reason.describe if r.end_reason else "",
                       "final_scores": r.final_scores, "error": r.error,
                       "agent_error": r.agent_error, "isolation": r.isolation.summary() if r.isolation else None}
    return data


def show_run(path: Path, as_json: bool = False) -> None:
    """``rgym show RUN_DIR``: the run's identity, how it ended, its gradings and what
    plugins (the integrity monitor) found."""
    path = Path(path)
    try:
        details = run_details(path)
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    sections = _sections(path)
    if as_json:
        details["sections"] = {s["title"]: s.get("data") for s in sections}
        click.echo(json.dumps(details, indent=2, default=str))
        return
    s = RunSummary(**{k: v for k, v in details["summary"].items() if k not in ("solver", "flagged")})
    echo = click.echo
    echo(f"run {s.run_id or '?'}  {path}")
    echo(f"  task:     {s.task_label}")
    echo(f"  solver:   {s.solver}" + (f"  seed {s.seed}" if s.seed is not None else ""))
    echo(f"  state:    {s.state}" + (f" ({STATUS_WORDS.get(s.state, '')})" if s.state != "complete" else ""))
    if s.problem:
        echo(f"  broken:   {s.problem}")
    end = details.get("end")
    if end:
        echo(f"  status:   {end['status']}" + (f" ({end['why']})" if end.get("why") else ""))
    echo(f"  score:    {score_text(s)}" + (f" [{s.primary_metric}, {s.direction}]" if s.primary_metric else ""))
    if s.best_validation is not None:
        echo(f"  best validation: {_num(s.best_validation)}")
    echo(f"  steps:    {s.steps}    time: {_duration(s.duration_s) or '-'}    cost: ${s.cost_usd:.4f}"
         f"    tokens: {s.input_tokens} in / {s.output_tokens} out")
    if s.started_at:
        echo(f"  started:  {_started(s.started_at)}")
    if end and end.get("final_scores"):
        echo("  final scores: " + ", ".join(f"{k}={_num(v, 6)}" for k, v in end["final_scores"].items()))
    for key in ("isolation", "error", "agent_error"):
        if end and end.get(key):
            echo(f"  {key.replace('_', ' ')}: {end[key]}")
    if details.get("trajectory_error"):
        echo(f"  trajectory: {details['trajectory_error']}")
    vals = details["validations"]
    if vals:
        echo(f"\nvalidations ({len(vals)}):")
        for v in vals:
            if v.get("valid"):
                scores = ", ".join(f"{k}={_num(x, 6)}" for k, x in (v.get("scores") or {}).items())
            else:
                scores = f"invalid: {v.get('error') or '?'}"
            echo(f"  step {v.get('step', '?'):>4}  {scores}")
    final = details.get("final")
    if final:
        what = ", ".join(f"{k}={_num(x, 6)}" for k, x in (final.get("scores") or {}).items()) \
            if final.get("valid") else f"invalid: {final.get('error') or '?'}"
        echo(f"\nfinal grading ({final.get('kind')}, step {final.get('step')}): {what}")
    for event in details.get("events") or []:
        text = event.get("error") or event.get("reason") or event.get("message") or ""
        echo(f"  event {event.get('type')}: {text}".rstrip(": "))
    for section in sections:
        echo(f"\n{section['title']}:")
        for line in section.get("lines") or []:
            echo(f"  {line}")
    if not any(sec["title"].lower().startswith("integrity") for sec in sections) and s.integrity:
        echo("\nintegrity: " + ("FLAGGED " + ", ".join(s.integrity.get("kinds") or [])
                                if s.flagged else "no error findings"))
        for f in s.integrity.get("findings") or []:
            echo(f"  {f.get('severity')}: {f.get('kind')} (steps {f.get('steps')}): {f.get('message')}")
    echo(f"\n`rgym view {path}` shows the whole trajectory.")

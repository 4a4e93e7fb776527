"""``rgym analyze``: what agents did and how they failed, per solver and task.

For every run: the action mix (each step classed as ``edit``, ``run``, ``view``,
``search``, ``validate``, ``submit`` or ``tool``, the way MLGym's analysis buckets
its agents' actions), how the episode ended, and failure modes found from the
trajectory alone:

``debug_loop``
    the same command (or tool call) failed ``repeat_threshold`` times or more
    without succeeding in between (edits between the attempts do not break it;
    edits the editor refused count as editor rejections instead).
``premature_submit``
    the agent submitted before any valid validation, or right after a validation
    that was worse than its best earlier one (a regression it did not undo).
``editor_rejections``
    the editor refused ``rejection_threshold`` edits or more in a row.
``idle_wait``
    a ``sleep``/``wait`` or a command that timed out kept the episode waiting
    ``idle_s`` seconds or more.
``budget_unused`` (a note)
    the agent submitted with more than ``unused_budget`` of its steps and time left
    and no improvement over the baseline.
``cost_without_improvement`` (a note)
    the run spent money and ended no better than the baseline.
``job_overlap``, ``foreground_timeout``, ``failed_job_used``, ``stale_after_best`` (a note)
    the failure modes of long runs: background jobs that wrote the same files at
    the same time, a command the per-action timeout killed that a job would have
    kept, results graded from a job that failed, time spent after the score
    stopped improving (:mod:`rgym_view.longruns`, which documents each rule).

A run whose trajectory is malformed (:mod:`rgym_core.runcheck`) is not analysed:
it is listed under ``skipped`` by one line naming its folder, the file and the
field, and the other runs are analysed as usual.  A run whose ``result.json`` is
malformed is analysed from its trajectory (state ``corrupt``), its ``problem``
naming the field.

Warnings flag a run; notes are context.  The cost per point of improvement is
the model cost divided by the improvement of the final primary score over the
baseline, in percent of the baseline (oriented by the metric's direction).
"""

from __future__ import annotations

import functools
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import (
    TRAJECTORY_FILE,
    BrokenRun,
    RunDir,
    RunDirError,
    RunSummary,
    better,
    broken_line,
    iter_numbered_records,
    record_problem,
    safe_summary,
)
from rgym_view.longruns import LONG_RUN_NOTES, LONG_RUN_WARNINGS, LongRunCollector, LongRunOptions
from rgym_view.runs import iter_runs, parallel_map

ACTION_CLASSES = ("edit", "run", "view", "search", "validate", "submit", "tool")
WARNING_MODES = ("debug_loop", "premature_submit", "editor_rejections", "idle_wait", *LONG_RUN_WARNINGS)
NOTE_MODES = ("budget_unused", "cost_without_improvement", *LONG_RUN_NOTES)
#: The action mix over an episode is counted in this many equal parts of its steps.
PHASES = 10
FAILURE_MODES = WARNING_MODES + NOTE_MODES

_EDIT_TOOLS = {"create", "edit", "insert", "write_file", "str_replace", "append"}
_VIEW_TOOLS = {"open", "goto", "scroll_up", "scroll_down", "read_file", "view"}
_SEARCH_TOOLS = {"search_dir", "search_file", "find_file"}
_VIEW_COMMANDS = {"cat", "head", "tail", "less", "more", "ls", "tree", "wc", "nl", "file", "stat", "du",
                  "df", "pwd", "nvidia-smi", "ps", "top", "free", "jq", "diff", "md5sum", "sha256sum",
                  "column", "od", "xxd", "hexdump", "env", "printenv", "whoami", "date", "uname", "history"}
_SEARCH_COMMANDS = {"grep", "egrep", "fgrep", "rg", "ag", "find", "locate", "which", "whereis", "fd"}
_EDIT_COMMANDS = {"cp", "mv", "rm", "mkdir", "touch", "patch", "chmod", "ln", "rmdir", "truncate", "tee"}
_WRAPPERS = {"sudo", "nohup", "timeout", "env", "time", "nice", "stdbuf", "exec", "command"}
_IDLE_COMMANDS = {"sleep", "wait"}
_REDIRECT = re.compile(r"(^|[^0-9&>])>{1,2}\s*(?!&|/dev/null)\S")


def _short(tool: str) -> str:
    return tool.split("/", 1)[-1]


_PLAIN = re.compile(r"[^'\"\\#]*")  # no quotes, escapes or comments: str.split is enough


def _words(command: str) -> list[str]:
    if _PLAIN.fullmatch(command):
        return command.split()
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def first_program(command: str) -> str:
    """The program a shell command runs first (past ``cd X &&``, assignments and
    wrappers such as ``timeout 60``)."""
    for segment in re.split(r"&&|\|\||;|\n", command):
        words = _words(segment.split("|", 1)[0])
        i = 0
        while i < len(words):
            w = words[i]
            if "=" in w and not w.startswith("-") and re.match(r"^[A-Za-z_]\w*=", w):
                i += 1
                continue
            if w in _WRAPPERS:
                i += 1
                while i < len(words) and (words[i].startswith("-") or re.match(r"^[\d.]+[smhd]?$", words[i])):
                    i += 1
                continue
            break
        if i >= len(words):
            continue
        program = words[i].rsplit("/", 1)[-1]
        if program == "cd":
            continue
        return program
    return ""


def classify_command(command: str, program: str | None = None) -> str:
    """The action class of a shell command (``program``: its :func:`first_program`,
    when the caller has it already)."""
    program = first_program(command) if program is None else program
    if program in _SEARCH_COMMANDS:
        return "search"
    if program in _EDIT_COMMANDS or (program == "sed" and re.search(r"\s-i", command)):
        return "edit"
    if program in ("cat", "echo", "printf") and _REDIRECT.search(command):
        return "edit"
    if program in _VIEW_COMMANDS or program == "sed":
        return "view"
    return "run"


def classify(tool: str, args: dict[str, Any] | None) -> str:
    """The action class of one step: edit, run, view, search, validate, submit or tool."""
    name = _short(tool)
    if name == "bash":
        return classify_command(str((args or {}).get("command") or ""))
    if name in ("validate", "submit"):
        return name
    if name in _EDIT_TOOLS:
        return "edit"
    if name in _VIEW_TOOLS:
        return "view"
    if name in _SEARCH_TOOLS:
        return "search"
    return "tool"


@define
class AnalysisOptions:
    """Thresholds of the failure-mode detectors."""

    repeat_threshold: int = 3
    rejection_threshold: int = 3
    idle_s: float = 300.0
    unused_budget: float = 0.5
    #: ``stale_after_best``: this long, and this share of the episode, after the best validation.
    stale_s: float = 600.0
    stale_share: float = 0.5


@define
class StepFacts:
    """What the detectors need of one step."""

    index: int
    tool: str
    key: str
    kind: str
    failed: bool
    rejected: bool
    timed_out: bool
    duration_s: float
    program: str


@define
class RunAnalysis:
    """One run: its action mix, its ending and its failure modes."""

    path: str
    task: str
    solver: str
    status: str
    end_reason: str | None
    steps: int
    actions: dict[str, int]
    findings: list[dict[str, Any]] = field(factory=list)
    score: float | None = None
    baseline: float | None = None
    cost_usd: float = 0.0
    improvement_pct: float | None = None
    cost_per_point: float | None = None
    #: The action mix over the episode: one count per class for each tenth of its steps.
    phases: list[dict[str, int]] = field(factory=list)
    #: Why the run's result.json was not used (one line naming the folder and field), or None.
    problem: str | None = None
    #: Its background jobs and the time after its best validation (:mod:`rgym_view.longruns`).
    long_run: dict[str, Any] | None = None

    @property
    def flagged(self) -> bool:
        return any(f["kind"] in WARNING_MODES for f in self.findings)

    def kinds(self) -> list[str]:
        return sorted({f["kind"] for f in self.findings})

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "task": self.task, "solver": self.solver, "status": self.status,
                "end_reason": self.end_reason, "steps": self.steps, "actions": dict(self.actions),
                "findings": list(self.findings), "flagged": self.flagged, "score": self.score,
                "baseline": self.baseline, "cost_usd": self.cost_usd,
                "improvement_pct": self.improvement_pct, "cost_per_point": self.cost_per_point,
                "phases": [dict(p) for p in self.phases], "problem": self.problem, "long_run": self.long_run}


@define
class GroupAnalysis:
    """One solver on one task, over its runs."""

    task: str
    solver: str
    runs: int = 0
    steps: int = 0
    actions: Counter[str] = field(factory=Counter)
    statuses: Counter[str] = field(factory=Counter)
    end_reasons: Counter[str] = field(factory=Counter)
    modes: Counter[str] = field(factory=Counter)
    cost_usd: float = 0.0
    improvement_pct: float = 0.0
    phases: list[Counter[str]] = field(factory=lambda: [Counter() for _ in range(PHASES)])

    @property
    def action_share(self) -> dict[str, float]:
        total = sum(self.actions.values())
        return {k: (self.actions.get(k, 0) / total if total else 0.0) for k in ACTION_CLASSES}

    @property
    def cost_per_point(self) -> float | None:
        return self.cost_usd / self.improvement_pct if self.improvement_pct > 0 and self.cost_usd else None

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "solver": self.solver, "runs": self.runs, "steps": self.steps,
                "actions": {k: self.actions.get(k, 0) for k in ACTION_CLASSES},
                "action_share": self.action_share, "statuses": dict(self.statuses),
                "end_reasons": dict(self.end_reasons),
                "failure_modes": {k: self.modes.get(k, 0) for k in FAILURE_MODES},
                "cost_usd": self.cost_usd, "cost_per_point": self.cost_per_point,
                "action_share_by_phase": self.phase_shares()}

    def phase_shares(self) -> list[dict[str, float]]:
        """The action mix in each tenth of the episodes (shares of that tenth's steps)."""
        out = []
        for counts in self.phases:
            total = sum(counts.values())
            out.append({k: (counts.get(k, 0) / total if total else 0.0) for k in ACTION_CLASSES})
        return out


@define
class AnalysisReport:
    runs: list[RunAnalysis]
    groups: list[GroupAnalysis]
    options: AnalysisOptions
    skipped: list[str] = field(factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"options": {"repeat_threshold": self.options.repeat_threshold,
                            "rejection_threshold": self.options.rejection_threshold,
                            "idle_s": self.options.idle_s, "unused_budget": self.options.unused_budget,
                            "stale_s": self.options.stale_s, "stale_share": self.options.stale_share},
                "groups": [g.to_dict() for g in self.groups], "runs": [r.to_dict() for r in self.runs],
                "skipped": list(self.skipped)}


@functools.lru_cache(maxsize=8192)
def _command_facts(command: str) -> tuple[str, str, str]:
    """``(program, class, key)`` of a shell command (agents repeat commands: cached)."""
    program = first_program(command) if command else ""
    return program, classify_command(command, program), " ".join(command.split())


def _step_facts(step: dict[str, Any]) -> StepFacts:
    action = step.get("action") or {}
    obs = step.get("observation") or {}
    info = obs.get("info") or {}
    tool = _short(str(action.get("tool") or "?"))
    args = action.get("args") or {}
    if tool == "bash":
        program, kind, key = _command_facts(str(args.get("command") or ""))
        key = key or "bash"
    else:
        program, kind, key = "", classify(tool, args), f"{tool} {sorted(args.items())!r}"
    exit_code = obs.get("exit_code")
    failed = bool(obs.get("error")) or (isinstance(exit_code, int) and exit_code != 0)
    rejected = info.get("applied") is False or (bool(info.get("lint_errors")) and bool(obs.get("error")))
    duration = step.get("duration_s")
    return StepFacts(index=int(step.get("index") or 0), tool=tool, key=key, kind=kind,
                     failed=failed, rejected=rejected, timed_out=bool(info.get("timed_out")),
                     duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
                     program=program)


def _debug_loops(steps: Sequence[StepFacts], threshold: int) -> list[dict[str, Any]]:
    open_streaks: dict[str, list[int]] = {}
    found: list[dict[str, Any]] = []

    def close(key: str) -> None:
        streak = open_streaks.pop(key, [])
        if len(streak) >= threshold:
            found.append({"kind": "debug_loop", "severity": "warning", "steps": streak,
                          "message": f"the same command failed {len(streak)} times without succeeding "
                                     f"in between: {key[:160]}"})

    for s in steps:
        if s.kind in ("validate", "submit") or s.rejected:
            continue  # refused edits are editor rejections, not a debug loop
        if s.failed:
            open_streaks.setdefault(s.key, []).append(s.index)
        elif s.key in open_streaks:
            close(s.key)
    for key in list(open_streaks):
        close(key)
    return sorted(found, key=lambda f: f["steps"][0])


def _premature_submit(steps: Sequence[StepFacts], gradings: list[dict[str, Any]], metric: str | None,
                      direction: str, has_validate: bool, submitted_at: int | None) -> list[dict[str, Any]]:
    if submitted_at is None or not has_validate:
        return []
    before = [g for g in gradings if g.get("kind") == "validate" and (g.get("step") or 0) < submitted_at]
    valid = [g for g in before if g.get("valid")]
    if not valid:
        what = "any validation" if not before else "any valid validation"
        return [{"kind": "premature_submit", "severity": "warning", "steps": [submitted_at],
                 "message": f"submitted at step {submitted_at} before {what}"}]
    if metric is None:
        return []
    values = [(g.get("step"), (g.get("scores") or {}).get(metric)) for g in valid]
    values = [(st, v) for st, v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(values) < 2:
        return []
    last_step, last = values[-1]
    best_step, best = values[0]
    for st, v in values[:-1]:
        if better(v, best, direction):  # type: ignore[arg-type]
            best_step, best = st, v
    if better(best, last, direction):  # type: ignore[arg-type]
        return [{"kind": "premature_submit", "severity": "warning", "steps": [last_step, submitted_at],
                 "message": f"submitted right after a regression: the last validation (step {last_step}, "
                            f"{metric}={last:.6g}) was worse than step {best_step}'s ({best:.6g})"}]
    return []


def _rejections(steps: Sequence[StepFacts], threshold: int) -> list[dict[str, Any]]:
    found, streak = [], []
    for s in [*steps, None]:
        if s is not None and s.rejected:
            streak.append(s.index)
            continue
        if s is not None and s.kind != "edit" and streak and s.kind in ("view", "search"):
            continue  # looking at the file between attempts does not end the streak
        if len(streak) >= threshold:
            found.append({"kind": "editor_rejections", "severity": "warning", "steps": list(streak),
                          "message": f"the editor refused {len(streak)} edits in a row"})
        streak = []
    return found


def _idle(steps: Sequence[StepFacts], idle_s: float) -> list[dict[str, Any]]:
    found = []
    for s in steps:
        if s.duration_s >= idle_s and (s.program in _IDLE_COMMANDS or s.timed_out):
            why = "timed out" if s.timed_out else f"ran {s.program}"
            found.append({"kind": "idle_wait", "severity": "warning", "steps": [s.index],
                          "message": f"step {s.index} waited {s.duration_s:.0f} s ({why})"})
    waits = [s for s in steps if s.program in _IDLE_COMMANDS and s.duration_s < idle_s]
    total = sum(s.duration_s for s in waits)
    if total >= idle_s and waits:
        found.append({"kind": "idle_wait", "severity": "warning", "steps": [s.index for s in waits],
                      "message": f"{len(waits)} sleep/wait steps waited {total:.0f} s in all"})
    return found


def improvement_pct(score: float | None, baseline: float | None, direction: str) -> float | None:
    """The improvement of ``score`` over ``baseline`` in percent of the baseline
    (positive = better, whatever the direction)."""
    if score is None or baseline is None or baseline == 0:
        return None
    delta = (baseline - score) if direction == "minimize" else (score - baseline)
    return delta / abs(baseline) * 100


class FactsCollector:
    """Gathers what the detectors need from a trajectory's records, one record at a
    time (so a reader that walks the records for another purpose, such as the
    viewer, analyses the run in the same pass)."""

    def __init__(self) -> None:
        self.steps: list[StepFacts] = []
        self.gradings: list[dict[str, Any]] = []
        self.tools: list[str] = []
        self.long_run = LongRunCollector()

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "step":
            facts = _step_facts(record.get("step") or {})
            self.steps.append(facts)
            self.long_run.add(record, facts.kind, facts.program)
            return
        if kind == "score":
            self.gradings.append(record.get("score") or {})
        elif kind == "start":
            self.tools = [_short(str(t)) for t in record.get("tools") or []]
        self.long_run.add(record)

    def analysis(self, summary: RunSummary, budget: dict[str, Any],
                 options: AnalysisOptions | None = None) -> RunAnalysis:
        """The run's analysis (``budget``: config.json's budget).  A run with jobs
        has its final workspace archive read for the jobs' ``.jobs/`` folders."""
        if self.long_run.jobs and summary.path:
            archive = RunDir(Path(summary.path)).archive_path
            if archive.is_file():
                self.long_run.read_archive(archive)
        return analyze_facts(self.steps, self.gradings, self.tools, summary, budget,
                             options or AnalysisOptions(), long_run=self.long_run)


def analyze_run(run: RunDir, options: AnalysisOptions | None = None,
                summary: RunSummary | None = None) -> RunAnalysis:
    """The analysis of one run directory; :class:`~rgym_core.runcheck.BrokenRun`
    (one line naming the folder, file and field) when its records are malformed."""
    summary = summary or safe_summary(run)
    if summary.problem and summary.state != "corrupt":  # the trajectory is broken
        raise BrokenRun(summary.problem)
    collector = FactsCollector()
    for line, record in iter_numbered_records(run.trajectory_path):
        problem = record_problem(record)
        if problem:
            raise BrokenRun(broken_line(run, f"{TRAJECTORY_FILE} line {line}", problem))
        collector.add(record)
    budget: dict[str, Any] = {}
    try:
        raw = run.config().get("budget")
        budget = raw if isinstance(raw, dict) else {}
    except RunDirError:
        pass
    analysis = collector.analysis(summary, budget, options)
    analysis.problem = summary.problem
    return analysis


def analyze_facts(steps: list[StepFacts], gradings: list[dict[str, Any]], tools: list[str],
                  s: RunSummary, budget: dict[str, Any], options: AnalysisOptions,
                  long_run: LongRunCollector | None = None) -> RunAnalysis:
    """The analysis of one run from its steps' facts, gradings, tool names, summary and
    budget (``long_run``: its jobs and step times, for the failure modes of long runs)."""
    actions = Counter(st.kind for st in steps)
    phases: list[dict[str, int]] = [{} for _ in range(PHASES)]
    for k, st in enumerate(steps):
        bucket = phases[min(PHASES - 1, (2 * k + 1) * PHASES // (2 * len(steps)))]  # by the step's middle
        bucket[st.kind] = bucket.get(st.kind, 0) + 1
    submitted_at = next((st.index for st in steps if st.kind == "submit"), None)
    if submitted_at is None and s.end_reason == "submit" and steps:
        submitted_at = steps[-1].index
    has_validate = "validate" in tools or any(st.kind == "validate" for st in steps) or not tools
    findings = _debug_loops(steps, options.repeat_threshold)
    findings += _premature_submit(steps, gradings, s.primary_metric, s.direction, has_validate, submitted_at)
    findings += _rejections(steps, options.rejection_threshold)
    findings += _idle(steps, options.idle_s)
    long_summary = None
    if long_run is not None:
        findings += long_run.findings(gradings, s.primary_metric, s.direction,
                                      LongRunOptions(stale_s=options.stale_s, stale_share=options.stale_share))
        long_summary = long_run.summary(gradings, s.primary_metric, s.direction)
    improvement = improvement_pct(s.score, s.baseline, s.direction)
    no_gain = improvement is None or improvement <= 0
    if submitted_at is not None and no_gain and isinstance(budget, dict):
        left = []
        max_steps, limit = budget.get("max_steps"), budget.get("time_limit_s")
        if isinstance(max_steps, int) and max_steps > 0:
            left.append(1 - s.steps / max_steps)
        if isinstance(limit, (int, float)) and limit > 0 and s.duration_s is not None:
            left.append(1 - s.duration_s / limit)
        if left and min(left) > options.unused_budget:
            findings.append({"kind": "budget_unused", "severity": "note", "steps": [submitted_at],
                             "message": f"submitted with {min(left) * 100:.0f}% or more of the budget left "
                                        "and no improvement over the baseline"})
    if s.cost_usd > 0 and no_gain and s.state == "complete":
        findings.append({"kind": "cost_without_improvement", "severity": "note", "steps": [],
                         "message": f"spent ${s.cost_usd:.4f} and ended no better than the baseline"})
    cpp = s.cost_usd / improvement if improvement and improvement > 0 and s.cost_usd else None
    status = s.status if s.state == "complete" else s.state
    return RunAnalysis(path=s.path, task=s.task_label, solver=s.solver, status=status or "?",
                       end_reason=s.end_reason, steps=len(steps), actions=dict(actions), phases=phases,
                       findings=findings,
                       score=s.score, baseline=s.baseline, cost_usd=s.cost_usd,
                       improvement_pct=improvement, cost_per_point=cpp, long_run=long_summary)


def _analyze_one(path: Path, *, options: AnalysisOptions) -> RunAnalysis | str:
    try:
        return analyze_run(RunDir(path), options)
    except (RunDirError, BrokenRun) as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a case the checks missed: this run only
        return f"{path}: cannot be analysed: {type(exc).__name__}: {str(exc)[:300]}"


def analyze_paths(paths: Iterable[Path | str], options: AnalysisOptions | None = None) -> AnalysisReport:
    """Analyse every run under ``paths`` and group them by (task, solver)."""
    options = options or AnalysisOptions()
    runs: list[RunAnalysis] = []
    skipped: list[str] = []
    done = parallel_map(functools.partial(_analyze_one, options=options),
                        [run.path for run in iter_runs([Path(p) for p in paths])])
    for item in done:
        if isinstance(item, RunAnalysis):
            runs.append(item)
        else:
            skipped.append(item)
    groups: dict[tuple[str, str], GroupAnalysis] = {}
    for r in runs:
        g = groups.setdefault((r.task, r.solver), GroupAnalysis(task=r.task, solver=r.solver))
        g.runs += 1
        g.steps += r.steps
        g.actions.update(r.actions)
        for total, part in zip(g.phases, r.phases, strict=False):
            total.update(part)
        g.statuses[r.status] += 1
        g.end_reasons[r.end_reason or r.status] += 1
        g.modes.update(set(r.kinds()))
        g.cost_usd += r.cost_usd
        if r.improvement_pct and r.improvement_pct > 0:
            g.improvement_pct += r.improvement_pct
    ordered = [groups[k] for k in sorted(groups)]
    return AnalysisReport(runs=runs, groups=ordered, options=options, skipped=skipped)


# --------------------------------------------------------------------------- text


def _table(rows: list[list[str]], head: list[str], right: set[int] | None = None) -> str:
    right = right or set()
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def render_text(report: AnalysisReport) -> str:
    """The tables ``rgym analyze`` prints."""
    if not report.runs:
        return "no runs to analyse" + "".join(f"\n  skipped (broken): {line}" for line in report.skipped)
    out = []
    rows = []
    for g in report.groups:
        share = g.action_share
        rows.append([g.task, g.solver, str(g.runs), str(g.steps),
                     *(f"{share[k] * 100:.0f}%" for k in ACTION_CLASSES)])
    out.append("Action mix (share of steps)\n" + _table(rows, ["task", "solver", "runs", "steps", *ACTION_CLASSES],
                                                        set(range(2, 4 + len(ACTION_CLASSES)))))
    statuses = sorted({s for g in report.groups for s in g.statuses})
    rows = [[g.task, g.solver, *(str(g.statuses.get(s, 0) or "") for s in statuses)] for g in report.groups]
    out.append("How episodes ended (runs per exit status)\n" +
               _table(rows, ["task", "solver", *statuses], set(range(2, 2 + len(statuses)))))
    reasons = sorted({s for g in report.groups for s in g.end_reasons})
    rows = [[g.task, g.solver, *(str(g.end_reasons.get(s, 0) or "") for s in reasons)] for g in report.groups]
    out.append("Why the agent's loop ended (runs per end reason)\n" +
               _table(rows, ["task", "solver", *reasons], set(range(2, 2 + len(reasons)))))
    rows = []
    for g in report.groups:
        cpp = g.cost_per_point
        rows.append([g.task, g.solver, str(g.runs), *(str(g.modes.get(m, 0) or "") for m in FAILURE_MODES),
                     f"${g.cost_usd:.4f}" if g.cost_usd else "",
                     f"${cpp:.4f}" if cpp is not None else ""])
    out.append("Failure modes (runs showing each)\n" +
               _table(rows, ["task", "solver", "runs", *FAILURE_MODES, "cost", "cost/point"],
                      set(range(2, 5 + len(FAILURE_MODES)))))
    flagged = [r for r in report.runs if r.findings]
    if flagged:
        lines = ["Runs with findings"]
        for r in flagged:
            lines.append(f"{r.path}  ({r.task}, {r.solver}, {r.status})")
            for f in r.findings:
                lines.append(f"  {f['severity']:<7} {f['kind']}: {f['message']}")
        out.append("\n".join(lines))
    jobbed = [r for r in report.runs if r.long_run and r.long_run.get("jobs")]
    if jobbed:
        out.append("Background jobs\n" + "\n".join(_jobs_lines(r) for r in jobbed))
    warned = sum(1 for r in report.runs if r.flagged)
    broken = [r.problem for r in report.runs if r.problem]
    if broken:
        out.append("Runs with a broken result.json (analysed from the trajectory)\n"
                   + "\n".join(f"  {line}" for line in broken))
    out.append(f"{len(report.runs)} runs, {warned} with warnings"
               + (f"; {len(report.skipped)} skipped (broken):\n" + "\n".join(f"  {line}" for line in report.skipped)
                  if report.skipped else ""))
    return "\n\n".join(out)


def _jobs_lines(run: RunAnalysis) -> str:
    """A run's jobs, one line each, and its time after its best validation."""
    long_run = run.long_run or {}
    lines = [run.path]
    for job in long_run.get("jobs") or []:
        start, end = job.get("started_at"), job.get("ended_at")
        span = f", {end - start:.0f} s" if isinstance(start, (int, float)) and isinstance(end, (int, float)) else ""
        writes = f"; writes {', '.join(job['writes'][:4])}" if job.get("writes") else ""
        failed = f"; failed: {job['failure']}" if job.get("failure") else ""
        lines.append(f"  {job['name']}: {job['state']} (started at step {job['step']}{span}){writes}{failed}"
                     f"  {job['command'][:80]}")
    after = long_run.get("after_best")
    if after:
        lines.append(f"  after the last improving validation (step {after['last_improvement_step']}): "
                     f"{after['after_best_s']:.0f} s of {after['episode_s']:.0f} s, {after['steps_after']} steps, "
                     f"{after['validations_after']} validations")
    return "\n".join(lines)

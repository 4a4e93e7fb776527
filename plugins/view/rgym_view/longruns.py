"""Failure modes of long runs: background jobs and the time after the best score.

``rgym analyze`` (:mod:`rgym_view.analysis`) feeds every trajectory record to a
:class:`LongRunCollector`; the viewer's run page shows what it finds with the other
failure modes.  What the jobs tools (``rgym_core.aci.jobs``) leave behind is read
from two places: the trajectory (``job_start`` gives a job's name and command; every
``job_*`` observation carries the job's state and elapsed time in ``info``;
``job_log`` outputs carry its log; a ``processes_killed`` record names what still
ran at the end) and, when the run kept one, the final workspace archive's
``.jobs/<name>/`` folders (``started``, ``exit``, ``killed``, ``log``), which fill
in what the agent never looked at.

``job_overlap``
    two jobs ran at the same time and both write the same file.  What a job writes:
    its command's redirects (``> f``, ``>> f``, ``tee f``), the values of
    output-like options (``-o``, ``--out``, ``--output``, ``--save``, ``--checkpoint``,
    ...), and the fixed file names the Python script it runs writes (``open('f',
    'w')``, ``.to_csv('f')``, ``torch.save(x, 'f')``, ``savefig('f')``, ...; the
    script as the final workspace has it).  A job's end is only taken where it is
    known (an observation or its ``exit`` file), or as the last time it was seen
    running, so an overlap is never guessed.
``foreground_timeout``
    a shell command that runs a program (not ``sleep``/``wait``) was killed by the
    per-action timeout while the jobs tools were on: ``job_start`` would have kept it
    running.
``failed_job_used``
    a job failed (its exit code is not 0, it vanished without one, or its log shows
    a Python traceback or another fatal error line such as ``ValueError: ...``;
    for a job that exited 0 only a traceback, ``CUDA out of memory``, a
    segmentation fault or ``Killed`` count) and it was the last experiment
    to end before a ``validate`` or the ``submit``: no job ended cleanly and no
    foreground program ran successfully between its end and that grading, so the
    grading scored what the failed job left.  Stopped jobs (``job_stop``) are not
    failures.
``stale_after_best`` (a note)
    the episode went on for ``stale_s`` seconds or more, and for ``stale_share`` or
    more of its wall time, after its last validation that improved the primary
    score (the first valid one counts as improving), with at least one validation
    after it that did not improve.

Every run's :meth:`LongRunCollector.summary` (its jobs, the last improving step
and what came after it) is kept in the analysis as ``long_run``.
"""

from __future__ import annotations

import math
import re
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core import better

__all__ = ["LONG_RUN_NOTES", "LONG_RUN_WARNINGS", "JobTrace", "LongRunCollector", "LongRunOptions",
           "job_writes", "script_writes"]

LONG_RUN_WARNINGS = ("job_overlap", "foreground_timeout", "failed_job_used")
LONG_RUN_NOTES = ("stale_after_best",)

_JOB_TOOLS = {"job_start", "job_list", "job_log", "job_wait", "job_stop"}
_IDLE = {"sleep", "wait"}
#: Foreground programs that are no experiment (for ``failed_job_used``).
_NOT_EXPERIMENTS = {"echo", "printf", "true", "false", "sleep", "wait", "cd", "export", "source", "pip",
                    "pip3", "apt", "apt-get", "conda", "kill", "pkill", "exit", ""}
_FATAL = re.compile(r"^(Traceback \(most recent call last\):|(?:[A-Za-z_][\w.]*)?(?:Error|Exception): .*"
                    r"|.*CUDA out of memory.*|Segmentation fault.*|Killed\s*$)", re.M)
#: What alone shows a failure in the log of a job that exited 0 (``train.py | tee log`` exits as tee does).
_STRONG = re.compile(r"^(Traceback \(most recent call last\):|.*CUDA out of memory.*|Segmentation fault.*|Killed\s*$)",
                     re.M)
#: A larger final workspace archive is not read for the jobs' folders (reading streams all of it).
MAX_ARCHIVE_BYTES = 1 << 30
_REDIRECT = re.compile(r"(?<![0-9&<>])(?:[12]?>{1,2})\s*(?!&)([^\s;|&<>]+)")
_TEE = re.compile(r"\btee\s+(?:-a\s+)?([^\s;|&<>]+)")
_OPTION = re.compile(r"(?:^|\s)(?:-o|--(?:out|output|outdir|out[-_]dir|output[-_](?:dir|file|path)|save|"
                     r"save[-_](?:path|dir|to)|checkpoint|checkpoint[-_]dir|ckpt|model[-_](?:path|dir|out)|"
                     r"log[-_]file|predictions|submission))(?:=|\s+)([^\s;|&<>]+)")
_SCRIPT = re.compile(r"\bpython[0-9.]*\s+(?:-[uOB]+\s+)*([^\s;|&<>]+\.py)\b")
_Q = r"""['"]([^'"\n{}]+)['"]"""
_WRITE_CALLS = [re.compile(p) for p in (
    r"\bopen\(\s*" + _Q + r"\s*,\s*(?:mode\s*=\s*)?['\"][^'\"]*[wax]",
    r"\.(?:to_csv|to_json|to_parquet|to_pickle|savefig|save_pretrained|save_model|write_text|write_bytes)"
    r"\(\s*" + _Q,
    r"\b(?:np|numpy|torch|joblib|pickle)\.(?:save|savez|savez_compressed|savetxt|dump)\([^'\"\n]*?,\s*" + _Q,
    r"\b(?:np|numpy)\.(?:save|savez|savez_compressed|savetxt)\(\s*" + _Q,
    r"\bPath\(\s*" + _Q + r"\s*\)\.(?:write_text|write_bytes|open\(\s*['\"][wax])",
)]


@define
class LongRunOptions:
    """Thresholds of ``stale_after_best``."""

    stale_s: float = 600.0
    stale_share: float = 0.5


@define
class JobTrace:
    """One background job as the trajectory (and the archive) shows it."""

    name: str
    command: str
    step: int
    started_at: float | None = None
    #: When it ended, where that is known (an observation of its end, its exit file).
    ended_at: float | None = None
    #: The last time an observation saw it running.
    seen_running_at: float | None = None
    state: str = "running"
    exit_code: int | None = None
    log: str = ""
    #: The step whose observation first showed it ended (None: never seen ended).
    seen_ended_step: int | None = None
    killed_at_end: bool = False
    writes: list[str] = field(factory=list)

    @property
    def end(self) -> float | None:
        """Its end where known, else the last time it was seen running (a lower bound)."""
        return self.ended_at if self.ended_at is not None else self.seen_running_at or self.started_at

    def failure(self) -> str | None:
        """Why this job failed (``exit 1``, ``a traceback in its log``), or None."""
        if self.state == "killed":
            return None
        why = []
        if self.exit_code not in (None, 0):
            why.append(f"exit {self.exit_code}")
        elif self.state == "gone":
            why.append("it vanished without an exit code")
        fatal = [m.group(0).strip() for m in _FATAL.finditer(self.log)]
        if fatal and (self.exit_code != 0 or _STRONG.search(self.log)):
            # the last fatal line: a traceback's exception rather than its header
            why.append(f"its log shows {fatal[-1][:120]!r}")
        return "; ".join(why) or None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "command": self.command, "step": self.step, "started_at": self.started_at,
                "ended_at": self.ended_at, "state": self.state, "exit_code": self.exit_code,
                "failure": self.failure(), "killed_at_end": self.killed_at_end, "writes": list(self.writes)}


def job_writes(command: str, scripts: dict[str, str] | None = None) -> list[str]:
    """The files a job's command writes: redirect and ``tee`` targets, output-like
    options' values, and the fixed names the Python script it runs writes (its
    source in ``scripts``, by path)."""
    out = {m for m in _REDIRECT.findall(command)} | set(_TEE.findall(command)) | set(_OPTION.findall(command))
    for script in _SCRIPT.findall(command):
        source = (scripts or {}).get(script.removeprefix("./"))
        if source:
            out.update(script_writes(source))
    return sorted(_norm(p) for p in out if p and not p.startswith("/dev/") and not p.startswith("$"))


def script_writes(source: str) -> list[str]:
    """The fixed file names a Python source writes (see the module's docstring)."""
    found = set()
    for pattern in _WRITE_CALLS:
        found.update(pattern.findall(source))
    return sorted(found)


def _norm(path: str) -> str:
    path = path.strip("'\"")
    return path[2:] if path.startswith("./") else path


def _state_code(state: str) -> int | None:
    if state.startswith("exited "):
        try:
            return int(state.split()[1])
        except (IndexError, ValueError):
            return None
    return None


@define
class _Step:
    index: int
    tool: str
    start: float
    end: float
    program: str
    kind: str
    ok: bool
    timed_out: bool
    command: str


class LongRunCollector:
    """Gathers the jobs, steps and gradings of one trajectory, one record at a time."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobTrace] = {}
        self.steps: list[_Step] = []
        self.jobs_tool = False
        self.killed: list[str] = []
        self.archive_read = False
        #: Why the final workspace archive was not read (None: read, or not needed).
        self.archive_problem: str | None = None
        self._scripts: dict[str, str] = {}

    def add(self, record: dict[str, Any], kind: str = "", program: str = "") -> None:
        """One trajectory record (``kind``/``program``: the step's action class and
        first program, as :mod:`rgym_view.analysis` found them)."""
        rtype = record.get("type")
        if rtype == "start":
            self.jobs_tool = any(str(t).rsplit("/", 1)[-1] == "job_start" for t in record.get("tools") or [])
        elif rtype == "processes_killed":
            self.killed.extend(str(c) for c in record.get("commands") or [])
        elif rtype == "step":
            self._step(record.get("step") or {}, kind, program)

    def _step(self, step: dict[str, Any], kind: str, program: str) -> None:
        action = step.get("action") or {}
        obs = step.get("observation") or {}
        info = obs.get("info") or {}
        tool = str(action.get("tool") or "?").rsplit("/", 1)[-1]
        args = action.get("args") or {}
        start = _num(step.get("started_at"))
        end = start + _num(step.get("duration_s"))
        index = int(step.get("index") or 0)
        code = obs.get("exit_code")
        ok = not obs.get("error") and not (isinstance(code, int) and code != 0)
        self.steps.append(_Step(index, tool, start, end, program, kind, ok, bool(info.get("timed_out")),
                                str(args.get("command") or "")))
        if tool not in _JOB_TOOLS:
            return
        self.jobs_tool = True
        seen = [info["job"]] if isinstance(info.get("job"), dict) else []
        seen += [j for j in info.get("jobs") or [] if isinstance(j, dict)]
        if tool == "job_start" and ok and seen:
            name = str(seen[0].get("name") or args.get("name") or "")
            if name and name not in self.jobs:
                elapsed = _num(seen[0].get("elapsed_s"))
                self.jobs[name] = JobTrace(name=name, command=str(args.get("command") or seen[0].get("command")
                                                                  or ""), step=index, started_at=end - elapsed)
        for job in seen:
            trace = self.jobs.get(str(job.get("name") or ""))
            if trace is not None:
                self._observe(trace, job, end, index)
        if tool == "job_log" and ok and seen:
            trace = self.jobs.get(str(seen[0].get("name") or ""))
            text = str(obs.get("output") or "")
            if trace is not None and len(text) > len(trace.log):
                trace.log = text

    def _observe(self, trace: JobTrace, job: dict[str, Any], at: float, index: int) -> None:
        state = str(job.get("state") or "")
        if state == "running":
            trace.seen_running_at = max(trace.seen_running_at or at, at)
            return
        if not state:
            return
        trace.state = state
        trace.exit_code = _state_code(state) if trace.exit_code is None else trace.exit_code
        elapsed = job.get("elapsed_s")
        if trace.ended_at is None and trace.started_at is not None and isinstance(elapsed, (int, float)):
            trace.ended_at = trace.started_at + float(elapsed)
        if trace.seen_ended_step is None:
            trace.seen_ended_step = index

    def read_archive(self, archive: Path) -> str | None:
        """Fill in the jobs from the final workspace's ``.jobs/`` folders and read the
        scripts the jobs run; returns why the archive could not be read, or None."""
        scripts = {s.removeprefix("./") for j in self.jobs.values() for s in _SCRIPT.findall(j.command)}
        try:
            size = archive.stat().st_size
        except OSError as exc:
            self.archive_problem = f"{archive}: {exc.strerror or exc}"
            return self.archive_problem
        if size > MAX_ARCHIVE_BYTES:
            self.archive_problem = (f"{archive}: {size >> 20} MiB, more than {MAX_ARCHIVE_BYTES >> 20} MiB: the jobs "
                                    "come from the trajectory alone")
            return self.archive_problem
        found: dict[str, dict[str, Any]] = {}
        sources: dict[str, str] = {}
        try:
            with tarfile.open(archive, "r:gz") as tar:
                for member in tar:
                    name = member.name.removeprefix("./").removeprefix("workspace/")
                    if not member.isfile() or member.size > 8 << 20:
                        continue
                    parts = name.split("/")
                    if len(parts) == 3 and parts[0] == ".jobs" and parts[1] in self.jobs:
                        fh = tar.extractfile(member)
                        data = fh.read() if fh is not None else b""
                        found.setdefault(parts[1], {})[parts[2]] = (data.decode("utf-8", "replace"), member.mtime)
                    elif name in scripts:
                        fh = tar.extractfile(member)
                        sources[name] = (fh.read() if fh is not None else b"").decode("utf-8", "replace")
        except (OSError, tarfile.TarError, EOFError) as exc:
            self.archive_problem = f"{archive}: {type(exc).__name__}: {exc}"
            return self.archive_problem
        self.archive_read = True
        for name, files in found.items():
            trace = self.jobs[name]
            if "started" in files:
                try:
                    trace.started_at = float(files["started"][0])
                except ValueError:
                    pass
            if "killed" in files:
                trace.state = "killed"
            if "exit" in files:
                try:
                    trace.exit_code = int(files["exit"][0].strip())
                except ValueError:
                    pass
                if trace.ended_at is None:
                    trace.ended_at = float(files["exit"][1])
                if trace.state == "running":
                    trace.state = f"exited {trace.exit_code}"
            if "log" in files and len(files["log"][0]) > len(trace.log):
                trace.log = files["log"][0]
        self._scripts = sources
        return None

    # ----------------------------------------------------------------- detectors

    def findings(self, gradings: Sequence[dict[str, Any]], metric: str | None, direction: str,
                 options: LongRunOptions) -> list[dict[str, Any]]:
        """Every long-run failure mode found (dicts like :mod:`rgym_view.analysis`'s)."""
        self._finish()
        return [*self._overlaps(), *self._timeouts(), *self._failed_used(gradings),
                *self._stale(gradings, metric, direction, options)]

    def _finish(self) -> None:
        end = max((s.end for s in self.steps), default=None)
        for trace in self.jobs.values():
            trace.writes = job_writes(trace.command, self._scripts)
            marks = [m for m in (trace.command.strip(), f".jobs/{trace.name}/run") if m]
            if trace.ended_at is None and any(m in c for m in marks for c in self.killed):
                trace.killed_at_end = True
                if trace.state == "running":
                    trace.state = "killed at the end"
                trace.ended_at = end

    def _overlaps(self) -> list[dict[str, Any]]:
        found = []
        jobs = sorted(self.jobs.values(), key=lambda j: j.step)
        for i, a in enumerate(jobs):
            for b in jobs[i + 1:]:
                both = sorted(set(a.writes) & set(b.writes))
                if not both or None in (a.started_at, b.started_at, a.end, b.end):
                    continue
                overlap = min(a.end, b.end) - max(a.started_at, b.started_at)  # type: ignore[type-var,operator]
                if overlap <= 0:
                    continue
                found.append({"kind": "job_overlap", "severity": "warning", "steps": [a.step, b.step],
                              "message": f"jobs {a.name} and {b.name} ran at the same time (for {overlap:.0f} s "
                                         f"or more) and both write {', '.join(both[:5])}"})
        return found

    def _timeouts(self) -> list[dict[str, Any]]:
        if not self.jobs_tool:
            return []
        return [{"kind": "foreground_timeout", "severity": "warning", "steps": [s.index],
                 "message": f"step {s.index} ran `{s.command.strip()[:120]}` in the foreground until the "
                            f"per-action timeout killed it after {s.end - s.start:.0f} s; job_start would "
                            "have kept it running"}
                for s in self.steps if s.tool == "bash" and s.timed_out and s.program not in _IDLE]

    def _failed_used(self, gradings: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        graded = {g.get("step") for g in gradings if g.get("kind") in ("validate", "submit")}
        at = [s for s in self.steps if s.kind in ("validate", "submit") or s.index in graded]
        found = []
        for job in sorted(self.jobs.values(), key=lambda j: j.step):
            why = job.failure()
            if why is None or job.killed_at_end:
                continue
            ended = job.ended_at
            if ended is None and job.seen_ended_step is not None:
                ended = next(s.end for s in self.steps if s.index == job.seen_ended_step)
            if ended is None:
                continue
            users = []
            for g in at:
                if g.start < ended:
                    continue
                if self._experiment_between(ended, g.start, job):
                    break
                users.append(g.index)
            if not users:
                continue
            looked = (f"its end was shown at step {job.seen_ended_step}" if job.seen_ended_step is not None
                      else "the agent never looked at it after it ended")
            found.append({"kind": "failed_job_used", "severity": "warning", "steps": [job.step, *users],
                          "message": f"job {job.name} failed ({why}; {looked}) and was the last experiment "
                                     f"before the grading at step {users[0]}"})
        return found

    def _experiment_between(self, t0: float, t1: float, failed: JobTrace) -> bool:
        for other in self.jobs.values():
            if (other is failed or other.ended_at is None or other.killed_at_end
                    or other.failure() is not None):
                continue
            if other.state != "killed" and t0 <= other.ended_at <= t1:
                return True
        return any(s.tool == "bash" and s.kind == "run" and s.ok and s.program not in _NOT_EXPERIMENTS
                   and t0 <= s.start and s.end <= t1 for s in self.steps)

    def _stale(self, gradings: Sequence[dict[str, Any]], metric: str | None, direction: str,
               options: LongRunOptions) -> list[dict[str, Any]]:
        summary = self.stale_summary(gradings, metric, direction)
        if not summary or summary["validations_after"] < 1:
            return []
        total = summary["episode_s"]
        after = summary["after_best_s"]
        if after < options.stale_s or not total or after / total < options.stale_share:
            return []
        return [{"kind": "stale_after_best", "severity": "note", "steps": [summary["last_improvement_step"]],
                 "message": f"the episode went on {after:.0f} s ({after / total * 100:.0f}% of its time) and "
                            f"{summary['steps_after']} steps after its last improving validation (step "
                            f"{summary['last_improvement_step']}, {metric}={summary['best']:.6g}); "
                            f"{summary['validations_after']} validations after it did not improve"}]

    def stale_summary(self, gradings: Sequence[dict[str, Any]], metric: str | None,
                      direction: str) -> dict[str, Any] | None:
        """The last improving validation and what came after it (None: none valid)."""
        if metric is None or not self.steps:
            return None
        values = [(g.get("step"), (g.get("scores") or {}).get(metric)) for g in gradings
                  if g.get("kind") == "validate" and g.get("valid")]
        values = [(st, v) for st, v in values if isinstance(st, int) and isinstance(v, (int, float))
                  and math.isfinite(v)]
        if not values:
            return None
        best_step, best = values[0]
        for st, v in values[1:]:
            if better(v, best, direction):  # type: ignore[arg-type]
                best_step, best = st, v
        ends = {s.index: s.end for s in self.steps}
        if best_step not in ends:
            return None
        first, last = min(s.start for s in self.steps), max(s.end for s in self.steps)
        return {"last_improvement_step": best_step, "best": best, "after_best_s": last - ends[best_step],
                "episode_s": last - first, "steps_after": sum(1 for s in self.steps if s.index > best_step),
                "validations_after": sum(1 for st, _ in values if st > best_step)}

    def summary(self, gradings: Sequence[dict[str, Any]], metric: str | None, direction: str) -> dict[str, Any]:
        """The run's jobs and its time after the best score, for JSON and the viewer."""
        return {"jobs": [j.to_dict() for j in sorted(self.jobs.values(), key=lambda j: j.step)],
                "archive_read": self.archive_read, "archive_problem": self.archive_problem,
                "after_best": self.stale_summary(gradings, metric, direction)}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0

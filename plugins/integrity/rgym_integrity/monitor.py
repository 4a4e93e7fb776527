"""The live monitor of one episode: collects evidence in the lifecycle hooks and
runs the checks when the episode ends.

* ``start`` (``rgym_episode_start``): resolve the task's policy, list the
  workspace, hash the protected files and the starter files (every starter
  folder: a dataset's ``starter: true`` folder, then the task's own);
* ``step`` (``rgym_step``): after every step that may write (not after ``open``,
  searches...), list the workspace again; each changed file gets a
  :class:`~rgym_integrity.trace.FileEvent` saying who wrote it; changed text files
  are read (first 256 KiB); a protected file that changed is hashed at once, and
  every protected file is hashed at each ``validate``;
* ``finish`` (``rgym_episode_end``): read ``workspace.tar.gz`` (the final
  workspace: protected files' end hashes, the submitted files' hashes, final
  text), collect other runs' submitted hashes, run the checks, write
  ``integrity.json`` and the summary into ``result.extras["integrity"]``.

Nothing here raises into the runner: a problem becomes a line of the report's
``limits``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rgym_integrity import __version__
from rgym_integrity.checks import run_checks
from rgym_integrity.findings import (
    EXTRAS_KEY,
    REPORT_FILE,
    IntegrityReport,
    write_report,
)
from rgym_integrity.policy import (
    IntegrityPolicy,
    any_match,
    is_code,
    is_text_like,
    merge_starter_folders,
    resolve_policy,
)
from rgym_integrity.shell import looks_only
from rgym_integrity.trace import (
    READ_ONLY_TOOLS,
    EpisodeTrace,
    FileEvent,
    StepRecord,
    Writer,
    attribute,
    events_from_commands,
    normalise,
    record_outside_writes,
)
from rgym_integrity.workspace import (
    READ_LIMIT_FILE,
    Listing,
    WorkspaceProbe,
    diff_listings,
    make_probe,
    read_archive,
    sha256_bytes,
)

#: At most this many submitted files are hashed, each at most this big.
MAX_ARTIFACTS = 2000
MAX_ARTIFACT_BYTES = 512 << 20
#: Tools after which no listing is taken: ``validate`` (the protected files are hashed
#: instead) and ``submit`` (the final workspace comes from ``workspace.tar.gz``).
QUIET_TOOLS = frozenset({"validate", "submit"})
#: At most this many file events are kept in integrity.json.
MAX_EVENTS = 5000
#: At most this many other runs are searched for reused files.
MAX_OTHER_RUNS = 5000


class EpisodeMonitor:
    """Evidence and checks for one episode (see the module docstring)."""

    def __init__(self, policy: IntegrityPolicy, sandbox: Any, run_dir: Path, run_id: str,
                 task_root: Path | None = None, starter: Path | Mapping[str, Path] | None = None) -> None:
        """``starter``: the starter files by workspace path (default: the policy's,
        :attr:`IntegrityPolicy.starter`), or one folder that holds them all."""
        self.policy = policy
        self.run_dir = Path(run_dir)
        self.trace = EpisodeTrace(policy=policy, run_dir=self.run_dir, run_id=run_id)
        self.probe = make_probe(sandbox, exclude=policy.mounts) if sandbox is not None else None
        self.hasher = WorkspaceProbe(sandbox, exclude=policy.mounts) if sandbox is not None else None
        self.listing: Listing | None = None
        self.open_file: str | None = None
        self.started = time.perf_counter()
        self.cost_start = 0.0
        self.cost_steps: list[float] = []
        self.cost_end = 0.0
        if starter is None:
            self.starter: dict[str, Path] = dict(policy.starter)
        elif isinstance(starter, Mapping):
            self.starter = dict(starter)
        else:
            self.starter = merge_starter_folders([Path(starter)])
        self.last_time = time.time()

    # -- the hooks ----------------------------------------------------------------------

    @classmethod
    def start(cls, episode: Any) -> EpisodeMonitor:
        t0 = time.perf_counter()
        sandbox = getattr(episode, "sandbox_handle", None)
        workspace = str(getattr(sandbox, "workspace", "") or "")
        task = episode.task
        policy = resolve_policy(task, getattr(episode, "datasets", {}) or {}, run_dir=episode.run_dir,
                                workspace=workspace)
        monitor = cls(policy, sandbox, episode.run_dir, episode.run_id, task_root=task.root)
        if policy.starter_error:
            monitor.trace.limits.append(policy.starter_error)
        if policy.leakage_error:
            monitor.trace.limits.append(f"the task's leakage policy could not be read: {policy.leakage_error}")
        monitor.trace.limits.extend(policy.problems)
        monitor._begin()
        monitor.cost_start = time.perf_counter() - t0
        return monitor

    def _begin(self) -> None:
        trace = self.trace
        trace.starter_hashes = _starter_hashes(self.starter)
        if self.probe is None:
            trace.listed = False
            trace.limits.append("no sandbox was given to the monitor: file changes come from the commands only")
            return
        self.last_time = time.time()
        snap = self.probe.snapshot(since=None)
        if snap is None:
            trace.listed = False
            trace.limits.append(f"{self.probe.problem}; file changes come from the commands only")
            return
        self.listing = snap.listing
        trace.initial = {p: e.size for p, e in self.listing.items()}
        protected = [p for p in self.listing if self.policy.is_protected(p)]
        for path, sha in self._hashes(protected).items():
            trace.protected[path] = {"start": sha, "hashes": []}
        for path, data in snap.texts.items():
            trace.texts.setdefault(path, []).append((0, data))

    def step(self, step: Any) -> None:
        t0 = time.perf_counter()
        try:
            self._step(step)
        except Exception as exc:  # noqa: BLE001 - the monitor never breaks an episode
            self.trace.limits.append(f"step {getattr(step, 'index', '?')}: the monitor failed "
                                     f"({type(exc).__name__}: {exc})")
        self.cost_steps.append(time.perf_counter() - t0)

    def _step(self, step: Any) -> None:
        trace = self.trace
        record = StepRecord.from_step(step)
        trace.steps.append(record)
        ws = self.policy.workspace
        if record.tool in ("open", "create") and record.args.get("path"):
            self.open_file = normalise(str(record.args["path"]), ws)
        record_outside_writes(record, trace)
        if self.listing is None or self.probe is None:
            trace.events.extend(events_from_commands(record, trace))
            return
        if record.tool in READ_ONLY_TOOLS or record.tool in QUIET_TOOLS or \
                (record.command is not None and looks_only(record.command)):
            if record.tool == "validate":
                self._hash_protected(record.index, "validation")
            return
        since, self.last_time = self.last_time, time.time()
        snap = self.probe.snapshot(since=since)
        if snap is None:
            trace.listed = False
            trace.limits.append(f"step {record.index}: {self.probe.problem}")
            self.listing = None
            return
        new = snap.listing
        changes = diff_listings(self.listing, new)
        self.listing = new
        to_read: list[str] = []
        changed_protected: list[str] = []
        for change in changes:
            event = attribute(record, change.path, trace, self.open_file)
            event.change = change.change
            event.size = change.after.size if change.after is not None else None
            if change.change == "deleted" and event.writer == Writer.PROCESS and record.command is not None:
                event.how = f"deleted during `{' '.join(record.command.text.split())[:80]}`"
            trace.events.append(event)
            if change.path in trace.protected:
                changed_protected.append(change.path)
            if change.after is not None and change.after.kind == "f" and change.after.size <= READ_LIMIT_FILE \
                    and (is_text_like(change.path) or is_code(change.path)):
                to_read.append(change.path)
        missing = [p for p in to_read if p not in snap.texts]
        if missing:  # more changed files than one snapshot reads
            snap.texts.update(self.probe.read(missing, signatures=new))
        for path in to_read:
            if path in snap.texts:
                trace.texts.setdefault(path, []).append((record.index, snap.texts[path]))
        if record.tool == "validate":
            self._hash_protected(record.index, "validation")
        elif changed_protected:
            for path, sha in self._hashes(changed_protected).items():
                trace.protected[path]["hashes"].append([record.index, "step", sha])

    def _hashes(self, paths: list[str]) -> dict[str, str | None]:
        """SHA-256 of protected files, read through the sandbox API as the agent user
        (``sha256sum`` in a fresh process); the host folder only when that fails."""
        if not paths:
            return {}
        if self.hasher is not None and self.hasher.problem is None:
            try:
                return self.hasher.hashes_or_raise(paths)
            except Exception as exc:  # noqa: BLE001
                self.hasher.problem = f"protected files could not be hashed in the sandbox ({exc})"
                self.trace.limits.append(f"{self.hasher.problem}; hashed from the host folder")
        return self.probe.hashes(paths) if self.probe is not None else {p: None for p in paths}

    def _hash_protected(self, index: int, label: str) -> None:
        if not self.trace.protected or self.probe is None:
            return
        for path, sha in self._hashes(list(self.trace.protected)).items():
            self.trace.protected[path]["hashes"].append([index, label, sha])

    def finish(self, result: Any) -> IntegrityReport:
        """Read the final workspace, run the checks, write the report and the summary."""
        t0 = time.perf_counter()
        trace = self.trace
        trace.scores = list(getattr(result, "scores", []) or [])
        try:
            self._final_workspace()
        except Exception as exc:  # noqa: BLE001
            trace.limits.append(f"the final workspace could not be read ({type(exc).__name__}: {exc})")
        try:
            trace.other_artifacts = other_runs_artifacts(self.run_dir, self.policy.task_id,
                                                         own=trace.run_id)
        except Exception as exc:  # noqa: BLE001
            trace.limits.append(f"other runs could not be searched for reuse ({type(exc).__name__}: {exc})")
        findings, ran, problems = run_checks(trace)
        trace.limits.extend(problems)
        self.cost_end = time.perf_counter() - t0
        report = self.report(findings, ran)
        try:
            write_report(self.run_dir, report)
        except OSError as exc:
            trace.limits.append(f"{REPORT_FILE} could not be written: {exc}")
        extras = getattr(result, "extras", None)
        if isinstance(extras, dict):
            extras[EXTRAS_KEY] = report.summary()
        return report

    # -- the end ------------------------------------------------------------------------

    def _final_workspace(self) -> None:
        trace = self.trace
        policy = self.policy
        archive = self.run_dir / "workspace.tar.gz"
        if not archive.is_file():
            trace.limits.append("the run has no workspace.tar.gz: the last listing stands for the final "
                                "workspace")
            for record in trace.protected.values():
                if record["hashes"]:
                    record["end"] = record["hashes"][-1][2]
            return
        count = {"n": 0}

        def want_hash(path: str, size: int) -> bool:
            if path in trace.protected:
                return True
            if size > MAX_ARTIFACT_BYTES or count["n"] >= MAX_ARTIFACTS:
                return False
            if any_match(path, policy.submission) and not any_match(path, policy.submission_exclude):
                count["n"] += 1
                return True
            return False

        def want_text(path: str, size: int) -> bool:
            return (is_text_like(path) or is_code(path)) and size <= 8 * READ_LIMIT_FILE

        files, problem = read_archive(archive, want_hash=want_hash, want_text=want_text)
        if problem:
            trace.limits.append(problem)
        trace.final = {p: {"size": f.size, "sha256": f.sha256, "head": f.head} for p, f in files.items()}
        for path, record in trace.protected.items():
            item = files.get(path)
            sha = item.sha256 if item is not None else None
            record["end"] = sha
            record["hashes"].append([trace.steps[-1].index if trace.steps else 0, "end", sha])
        for path, f in files.items():
            if f.sha256 and f.sha256 not in trace.starter_hashes and any_match(path, policy.submission) \
                    and not any_match(path, policy.submission_exclude):
                trace.artifacts[path] = {"sha256": f.sha256, "size": f.size}
        if trace.listed:
            # files that appeared after the last listing (a background process)
            last = self.listing or {}
            for path in files:
                if path not in last and path not in trace.initial and trace.last_event(path) is None:
                    trace.events.append(FileEvent(step=trace.steps[-1].index if trace.steps else 0, path=path,
                                                  change="created", writer=Writer.PROCESS,
                                                  how="appeared after the last step (a background process)",
                                                  size=files[path].size))

    def report(self, findings: list[Any], ran: list[str]) -> IntegrityReport:
        trace = self.trace
        steps = self.cost_steps
        per_step = (sum(steps) / len(steps)) if steps else 0.0
        cost = {"start_s": round(self.cost_start, 6), "steps_s": round(sum(steps), 6),
                "per_step_ms": round(per_step * 1000, 3), "max_step_ms": round(max(steps, default=0) * 1000, 3),
                "end_s": round(self.cost_end, 6),
                "total_s": round(self.cost_start + sum(steps) + self.cost_end, 6),
                "sandbox_calls": (self.probe.execs if self.probe is not None else 0)
                + (self.hasher.execs if self.hasher is not None and self.hasher is not self.probe else 0),
                "probe": type(self.probe).__name__ if self.probe is not None else None}
        protected = {p: {"start": r.get("start"), "end": r.get("end"), "checks": r.get("hashes", [])}
                     for p, r in trace.protected.items()}
        events = [e.to_dict() for e in trace.events[:MAX_EVENTS]]
        limits = list(trace.limits)
        if len(trace.events) > MAX_EVENTS:
            limits.append(f"{len(trace.events) - MAX_EVENTS} more file changes are not listed here")
        if self.probe is not None and self.probe.truncated:
            limits.append("the workspace listing was cut at its size limit: some files were not followed")
        return IntegrityReport(run_id=trace.run_id, task=self.policy.task_id, findings=list(findings),
                               checks=ran, protected=protected, files=events, artifacts=dict(trace.artifacts),
                               limits=limits, cost=cost, monitor=f"rgym-integrity {__version__}")


def _starter_hashes(starter: Mapping[str, Path]) -> set[str]:
    """SHA-256 of the starter files (at most 2000, each at most 64 MiB)."""
    out: set[str] = set()
    for _, path in sorted(starter.items())[:2000]:
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= 64 << 20:
                out.add(sha256_bytes(path.read_bytes()))
        except OSError:
            continue
    return out


def other_runs_artifacts(run_dir: Path, task_id: str, *, own: str) -> dict[str, list[dict[str, Any]]]:
    """Submitted files' hashes of the other runs of ``task_id`` near ``run_dir`` (its
    task's runs folder: ``runs/<task>/...``), from their ``integrity.json``."""
    here = Path(run_dir).resolve()
    root = here.parent.parent
    out: dict[str, list[dict[str, Any]]] = {}
    if not root.is_dir() or len(root.parts) < 3:
        return out
    for n, candidate in enumerate(_nearby_runs(root)):
        if n >= MAX_OTHER_RUNS:
            break
        path = candidate / REPORT_FILE
        if candidate == here or not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("task") != task_id or data.get("run_id") == own:
            continue
        for name, item in (data.get("artifacts") or {}).items():
            sha = item.get("sha256") if isinstance(item, dict) else None
            if sha:
                out.setdefault(sha, []).append({"run_id": data.get("run_id"), "run_dir": str(candidate),
                                                "path": name})
    return out


def _nearby_runs(root: Path) -> list[Path]:
    """Run directories two levels below ``root`` (``<task>/<solver>/<run>``) or one
    (a sweep's cells), newest first; links are not followed."""
    found: list[Path] = []
    try:
        level1 = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    except OSError:
        return found
    for first in level1:
        if (first / REPORT_FILE).is_file():
            found.append(first)
            continue
        try:
            found += [p for p in first.iterdir() if p.is_dir() and not p.is_symlink()
                      and (p / REPORT_FILE).is_file()]
        except OSError:
            continue
    return sorted(found, key=lambda p: p.name, reverse=True)


__all__ = ["EpisodeMonitor", "other_runs_artifacts"]

"""The evidence the checks read: the episode's steps, who wrote which file at which
step, hashes of protected files, and the final workspace.

:class:`EpisodeTrace` is filled live by the monitor (:mod:`rgym_integrity.monitor`)
or rebuilt from a run directory (:func:`trace_from_run_dir`: the trajectory, the
``files`` the monitor recorded in ``integrity.json`` when there is one, and
``workspace.tar.gz``).  The checks (:mod:`rgym_integrity.checks`) are pure
functions of it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_integrity.policy import IntegrityPolicy
from rgym_integrity.shell import CommandInfo, WriteHow, parse_command

#: Tools that write the file they name (``create``) or the open file (``edit``, ``insert``).
EDITOR_TOOLS = {"create": "create tool", "edit": "edit tool", "insert": "insert tool",
                "write_file": "write_file tool", "str_replace": "str_replace tool"}
#: Tools that only read: no listing is needed after them.
READ_ONLY_TOOLS = frozenset({"open", "goto", "scroll_up", "scroll_down", "search_dir", "search_file",
                             "find_file", "literature_search", "memory_read", "memory_search",
                             "memory_list", "read_pdf"})


class Writer:
    """Who wrote a file (:attr:`FileEvent.writer`)."""

    HAND = "hand"          # typed: an editor tool, echo/printf/here-document, sed -i
    COPY = "copy"          # copied from a file whose origin is unknown (outside, downloaded)
    PROCESS = "process"    # a program's output
    START = "start"        # laid out before the first step


@define
class FileEvent:
    """A file that changed during a step, and how it came to be."""

    step: int
    path: str
    change: str
    writer: str
    how: str
    size: int | None = None
    sources: list[str] = field(factory=list)
    literal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "path": self.path, "change": self.change,
                               "writer": self.writer, "how": self.how}
        if self.size is not None:
            out["size"] = self.size
        if self.sources:
            out["sources"] = self.sources
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileEvent:
        return cls(step=int(data["step"]), path=str(data["path"]), change=str(data.get("change", "modified")),
                   writer=str(data.get("writer", Writer.PROCESS)), how=str(data.get("how", "")),
                   size=data.get("size"), sources=list(data.get("sources") or []))


@define
class StepRecord:
    """One step as the checks see it."""

    index: int
    tool: str
    args: dict[str, Any] = field(factory=dict)
    thought: str | None = None
    output: str = ""
    exit_code: int | None = None
    error: bool = False
    score: dict[str, float] | None = None
    info: dict[str, Any] = field(factory=dict)
    command: CommandInfo | None = None

    @classmethod
    def from_step(cls, step: Any) -> StepRecord:
        """From a :class:`rgym_core.records.Step` (or its dict form in the trajectory)."""
        if isinstance(step, dict):
            action = step.get("action") or {}
            obs = step.get("observation") or {}
            index = int(step.get("index", 0))
            tool, args, thought = action.get("tool", ""), dict(action.get("args") or {}), action.get("thought")
            output, exit_code = str(obs.get("output") or ""), obs.get("exit_code")
            error, score, info = bool(obs.get("error")), obs.get("score"), dict(obs.get("info") or {})
        else:
            index, tool = step.index, step.action.tool
            args, thought = dict(step.action.args or {}), step.action.thought
            obs = step.observation
            output, exit_code, error, score, info = obs.output, obs.exit_code, obs.error, obs.score, dict(obs.info)
        record = cls(index=index, tool=str(tool), args=args, thought=thought, output=output,
                     exit_code=exit_code, error=error, score=dict(score) if score else None, info=info)
        if record.tool == "bash":
            record.command = parse_command(str(args.get("command", "")))
        return record

    @property
    def text_of_action(self) -> str:
        """Everything the agent typed in this action."""
        if self.command is not None:
            return self.command.literal_text()
        return "\n".join(str(v) for v in self.args.values() if isinstance(v, str | int | float))


@define
class EpisodeTrace:
    """Everything the checks need about one episode."""

    policy: IntegrityPolicy
    steps: list[StepRecord] = field(factory=list)
    events: list[FileEvent] = field(factory=list)
    #: path -> {"start": sha, "steps": {step: sha or None}, "end": sha or None}
    protected: dict[str, dict[str, Any]] = field(factory=dict)
    #: Text read from changed files: path -> [(step, first bytes)], oldest first.
    texts: dict[str, list[tuple[int, bytes]]] = field(factory=dict)
    #: The final workspace: path -> (size, sha256 or None, first bytes or None).
    final: dict[str, Any] | None = None
    #: Files present when the episode started (path -> size).
    initial: dict[str, int] = field(factory=dict)
    #: The gradings (:class:`rgym_core.records.ScoreRecord` or dicts).
    scores: list[Any] = field(factory=list)
    #: Every grading the trajectory recorded, also those a regrade replaced in the
    #: result (filled after the fact; the live monitor's ``scores`` are all there is).
    history: list[Any] = field(factory=list)
    run_dir: Path | None = None
    run_id: str = ""
    limits: list[str] = field(factory=list)
    #: True when file changes were observed through listings (else commands only).
    listed: bool = True
    #: Writes outside the workspace, by absolute path: the last write's writer.
    outside: dict[str, str] = field(factory=dict)
    #: This run's submitted files: path -> {"sha256", "size"}.
    artifacts: dict[str, dict[str, Any]] = field(factory=dict)
    #: Other runs' submitted files of the same task: sha256 -> [{"run_id", "run_dir", "path"}].
    other_artifacts: dict[str, list[dict[str, Any]]] = field(factory=dict)
    #: SHA-256 of the task's starter files (identical copies are no reuse).
    starter_hashes: set[str] = field(factory=set)
    #: What the checks computed once for all of them (typed files, the number pool).
    cache: dict[str, Any] = field(factory=dict)

    def step(self, index: int) -> StepRecord | None:
        for s in self.steps:
            if s.index == index:
                return s
        return None

    def last_event(self, path: str, before: int | None = None) -> FileEvent | None:
        """The last change of ``path`` (at or before step ``before``)."""
        found = None
        for event in self.events:
            if event.path == path and (before is None or event.step <= before):
                found = event
        return found

    def events_of(self, path: str) -> list[FileEvent]:
        return [e for e in self.events if e.path == path]

    def text_at(self, path: str, step: int | None = None) -> bytes | None:
        """The last text read from ``path`` (at or before ``step``); the final one first."""
        if step is None and self.final is not None and path in self.final:
            head = self.final[path].get("head")
            if head is not None:
                return head
        found = None
        for s, data in self.texts.get(path, []):
            if step is None or s <= step:
                found = data
        return found

    def final_paths(self) -> list[str]:
        """The files of the final workspace: ``workspace.tar.gz``'s, plus those the last
        listing saw that the archive left out (names it refuses, such as ones with a
        newline, never reach the grader but may still be the agent's claims)."""
        present: dict[str, bool] = {p: True for p in self.initial}
        for e in self.events:
            present[e.path] = e.change != "deleted"
        alive = {p for p, here in present.items() if here}
        if self.final is not None:
            return sorted(set(self.final) | {p for p in alive if p not in self.initial})
        return sorted(alive)


def normalise(path: str, workspace: str) -> str | None:
    """A command's path as a workspace-relative path, or ``None`` when it is outside."""
    path = path.strip()
    if not path:
        return None
    if path.startswith("~"):
        return None
    if path.startswith("/"):
        ws = workspace.rstrip("/")
        if ws and (path == ws or path.startswith(ws + "/")):
            rel = posixpath.normpath(path[len(ws) + 1:]) if path != ws else "."
            return None if rel.startswith("..") else rel
        return None
    rel = posixpath.normpath(path)
    return None if rel.startswith("..") else rel


def match_write(changed: str, written: str) -> bool:
    """A changed workspace path is the path a command wrote (the shell may have
    been in a sub-folder)."""
    return changed == written or changed.endswith("/" + written)


def attribute(step: StepRecord, path: str, trace: EpisodeTrace, open_file: str | None) -> FileEvent:
    """Who changed ``path`` during ``step`` (the change itself comes from a listing)."""
    ws = trace.policy.workspace
    if step.tool in EDITOR_TOOLS:
        target = step.args.get("path") if step.tool == "create" else open_file
        rel = normalise(str(target), ws) if target else None
        if rel is None or match_write(path, rel):
            literal = step.args.get("content") or step.args.get("replacement") or step.args.get("text")
            return FileEvent(step=step.index, path=path, change="modified", writer=Writer.HAND,
                             how=EDITOR_TOOLS[step.tool], literal=str(literal) if literal else None)
    if step.command is not None:
        for write in reversed(step.command.writes):
            rel = normalise(write.path, ws)
            if rel is None or not match_write(path, rel):
                continue
            writer, sources = Writer.PROCESS, list(write.sources)
            if write.how is WriteHow.HAND:
                writer = Writer.HAND
            elif write.how is WriteHow.COPY:
                writer = _copied_writer(write.sources, trace, step.index)
            return FileEvent(step=step.index, path=path, change="modified", writer=writer,
                             how=_how_text(write.tool, write.how), sources=sources, literal=write.literal)
        runs = step.command.runs
        if runs:
            names = []
            for run in runs[:4]:
                what = run.script or (f"-m {run.module}" if run.module else ("-c ..." if run.code else ""))
                names.append(f"`{run.program} {what}`".replace(" `", "`") if not what else f"`{run.program} {what}`")
            return FileEvent(step=step.index, path=path, change="modified", writer=Writer.PROCESS,
                             how=f"written while {', '.join(names)} ran")
        first = step.command.commands[0].name if step.command.commands else "the command"
        return FileEvent(step=step.index, path=path, change="modified", writer=Writer.PROCESS,
                         how=f"changed while `{first}` ran (a program or a background process)")
    return FileEvent(step=step.index, path=path, change="modified", writer=Writer.PROCESS,
                     how=f"changed during the {step.tool} step (a background process)")


def _how_text(tool: str, how: WriteHow) -> str:
    if how is WriteHow.HAND:
        return f"typed into the command ({tool})"
    if how is WriteHow.COPY:
        return f"copied ({tool})"
    return f"output of {tool}"


def _copied_writer(sources: Iterable[str], trace: EpisodeTrace, step: int) -> str:
    """A copy is as trustworthy as its source: typed text copied is typed."""
    ws = trace.policy.workspace
    writers = []
    for src in sources:
        if "://" in src:
            writers.append(Writer.COPY)
            continue
        rel = normalise(src, ws)
        if rel is None:
            absolute = src if src.startswith("/") else None
            writers.append(trace.outside.get(absolute or src, Writer.COPY))
            continue
        event = None
        for e in trace.events:
            if e.step <= step and (e.path == rel or e.path.endswith("/" + rel)):
                event = e
        if event is None:
            writers.append(Writer.START if rel in trace.initial else Writer.COPY)
        else:
            writers.append(event.writer)
    if not writers:
        return Writer.COPY
    if Writer.HAND in writers:
        return Writer.HAND
    if all(w in (Writer.PROCESS, Writer.START) for w in writers):
        return Writer.PROCESS
    return Writer.COPY


def record_outside_writes(step: StepRecord, trace: EpisodeTrace) -> None:
    """Remember hand writes outside the workspace (``/tmp/x``), for later copies."""
    if step.command is None:
        return
    ws = trace.policy.workspace
    for write in step.command.writes:
        if normalise(write.path, ws) is None and write.path.startswith("/"):
            if write.how is WriteHow.HAND:
                trace.outside[write.path] = Writer.HAND
            elif write.how is WriteHow.COPY:
                trace.outside[write.path] = _copied_writer(write.sources, trace, step.index)
            else:
                trace.outside[write.path] = Writer.PROCESS


def events_from_commands(step: StepRecord, trace: EpisodeTrace) -> list[FileEvent]:
    """File events when no listing is available: the writes the command names."""
    events = []
    if step.tool in EDITOR_TOOLS and step.tool == "create" and step.args.get("path"):
        rel = normalise(str(step.args["path"]), trace.policy.workspace)
        if rel:
            events.append(attribute(step, rel, trace, None))
    if step.command is not None:
        for write in step.command.writes:
            rel = normalise(write.path, trace.policy.workspace)
            if rel:
                events.append(attribute(step, rel, trace, None))
    return events


__all__ = ["EDITOR_TOOLS", "READ_ONLY_TOOLS", "EpisodeTrace", "FileEvent", "StepRecord", "Writer",
           "attribute", "events_from_commands", "match_write", "normalise", "record_outside_writes"]

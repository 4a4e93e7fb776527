"""Helpers the checks share: the final files' text, the metric values they state,
which files were typed rather than computed, and the numbers commands printed."""

from __future__ import annotations

import io
import math
import re
import tokenize
from collections.abc import Iterable

from attrs import define, field

from rgym_integrity.numbers import Statement, numbers_in, statements_in
from rgym_integrity.policy import extension, is_code, is_text_like
from rgym_integrity.trace import EpisodeTrace, FileEvent, StepRecord, Writer

_QUOTED = re.compile(r"(?s)(\"\"\"|''')(.*?)\1|\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'")


def decode(data: bytes | None) -> str | None:
    if data is None or b"\x00" in data[:4096]:
        return None
    return data.decode("utf-8", errors="replace")


def string_literals(source: str, path: str = "") -> str:
    """The string literals of a program (where a hard-coded result would be), one per line."""
    out: list[str] = []
    if extension(path) == ".py":
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.STRING:
                    out.append(tok.string)
                elif tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                    out.append(tok.string)
            return "\n".join(out)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
    for match in _QUOTED.finditer(source):
        out.append(next(g for g in match.groups()[1:] if g is not None))
    return "\n".join(out)


def statements_of_text(text: str, path: str, metrics: Iterable[str]) -> list[Statement]:
    """Metric values a file states: all of a text file, the string literals of code."""
    if is_code(path):
        return statements_in(string_literals(text, path), metrics)
    return statements_in(text, metrics)


def final_text(trace: EpisodeTrace, path: str) -> str | None:
    return decode(trace.text_at(path))


@define
class TypedFile:
    """A final file whose text was typed (not computed): the event that last wrote it
    and the metric values it states."""

    path: str
    event: FileEvent
    statements: list[Statement] = field(factory=list)
    reason: str = ""


def typed_numbers(step: StepRecord | None) -> set[float]:
    if step is None:
        return set()
    return {n.value for n in numbers_in(step.text_of_action)}


def script_texts(trace: EpisodeTrace, step: StepRecord) -> list[str]:
    """The source of the programs a bash step ran (as read at or before that step)."""
    return [text for _, text in script_sources(trace, step)]


def script_sources(trace: EpisodeTrace, step: StepRecord) -> list[tuple[str | None, str]]:
    """(workspace path or ``None`` for ``python -c``, source) of the programs a bash
    step ran, as read at or before that step."""
    out: list[tuple[str | None, str]] = []
    if step.command is None:
        return out
    for run in step.command.runs:
        if run.code:
            out.append((None, run.code))
        if run.script:
            rel = run.script[2:] if run.script.startswith("./") else run.script
            for path in trace.texts:
                if path == rel or path.endswith("/" + rel):
                    text = decode(trace.text_at(path, step.index))
                    if text:
                        out.append((path, text))
                    break
            else:
                if trace.final is not None:
                    for path in trace.final:
                        if path == rel or path.endswith("/" + rel):
                            text = decode(trace.text_at(path))
                            if text:
                                out.append((path, text))
                            break
    return out


#: Starter files larger than this are not read for their lines (data, not code).
STARTER_TEXT_LIMIT = 1 << 20


def starter_lines(trace: EpisodeTrace) -> frozenset[str]:
    """The stripped lines of the task's own starter text files (code, docs, configs):
    the task author's text, which no agent typed."""
    cached = trace.cache.get("starter_lines")
    if cached is not None:
        return frozenset(cached)
    lines: set[str] = set()
    for rel, host in sorted(trace.policy.starter.items())[:2000]:
        if not (is_code(rel) or is_text_like(rel)):
            continue
        try:
            if host.stat().st_size > STARTER_TEXT_LIMIT:
                continue
            text = decode(host.read_bytes())
        except OSError:
            continue
        if text:
            lines.update(line.strip() for line in text.splitlines())
    lines.discard("")
    trace.cache["starter_lines"] = frozenset(lines)
    return frozenset(lines)


def agents_text(trace: EpisodeTrace, text: str) -> str:
    """``text`` without the lines that are the task's own starter lines (see
    :func:`starter_lines`): what the agent wrote or changed.  A line cut off where the
    stored text ends counts as the starter's when a starter line begins with it."""
    own = starter_lines(trace)
    if not own:
        return text
    lines = text.splitlines()
    kept = [line for line in lines if line.strip() and line.strip() not in own]
    if kept and kept[-1] == lines[-1] and not text.endswith("\n"):
        tail = lines[-1].strip()
        if any(line.startswith(tail) for line in own):
            kept.pop()
    return "\n".join(kept)


def typed_files(trace: EpisodeTrace) -> list[TypedFile]:
    """Final files whose content was typed: by an editor tool, echo/printf/a
    here-document, a copy of typed text, or a program that only printed values
    typed into its own code."""
    cached = trace.cache.get("typed_files")
    if cached is not None:
        return list(cached)
    out: list[TypedFile] = []
    metrics = trace.policy.metric_names
    last: dict[str, FileEvent] = {e.path: e for e in trace.events}
    for path in trace.final_paths():
        if not (is_text_like(path) or is_code(path)):
            continue
        found = last.get(path)
        if found is None or found.change == "deleted":
            continue
        event = found
        if event.writer != Writer.HAND and (event.writer != Writer.PROCESS or is_code(path)
                                            or not trace.policy.is_result_file(path)):
            continue
        text = final_text(trace, path)
        if text is None:
            continue
        statements = statements_of_text(text, path, metrics)
        if event.writer == Writer.HAND:
            out.append(TypedFile(path, event, statements, event.how))
        elif event.writer == Writer.PROCESS and statements and not is_code(path):
            step = trace.step(event.step)
            if step is None:
                continue
            typed = typed_numbers(step)
            for source in script_texts(trace, step):
                typed |= {n.value for n in numbers_in(string_literals(source, "x.py") + "\n" + source)}
            if typed and all(s.value in typed for s in statements):
                out.append(TypedFile(path, event, statements,
                                     f"{event.how}, printing only values typed into its code"))
    trace.cache["typed_files"] = list(out)
    return out


@define
class Pool:
    """The numbers commands printed, by step, minus those the agent typed first."""

    entries: list[tuple[int, float]] = field(factory=list)
    typed_first: dict[float, int] = field(factory=dict)

    def usable(self, before: int) -> list[float]:
        return [v for step, v in self.entries
                if step < before and not self.typed_first.get(v, math.inf) <= step]


def computed_pool(trace: EpisodeTrace) -> Pool:
    cached = trace.cache.get("pool")
    if cached is not None:
        return cached
    pool = Pool()
    trace.cache["pool"] = pool
    for n in numbers_in(trace.policy.given_text):
        pool.entries.append((0, n.value))
    for step in trace.steps:
        typed = typed_numbers(step)
        for value in typed:
            pool.typed_first.setdefault(value, step.index)
        for n in numbers_in(step.output):
            if n.value not in typed:
                pool.entries.append((step.index, n.value))
        for value in (step.score or {}).values():
            if isinstance(value, int | float):
                pool.entries.append((step.index, float(value)))
    return pool


__all__ = ["Pool", "TypedFile", "agents_text", "computed_pool", "decode", "final_text", "script_sources",
           "script_texts", "starter_lines",
           "statements_of_text", "string_literals", "typed_files", "typed_numbers"]

"""Protected files: the task's evaluation files, hashed at the start, after every
step that changed them, at every validation and at the end."""

from __future__ import annotations

from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.trace import EpisodeTrace


def check(trace: EpisodeTrace) -> list[Finding]:
    findings: list[Finding] = []
    for path, record in sorted(trace.protected.items()):
        start = record.get("start")
        if start is None:
            continue  # declared but not laid out: nothing to protect
        history = record.get("hashes") or []
        changed = [(step, label, sha) for step, label, sha in history if sha != start]
        if not changed:
            continue
        first_step, label, sha = changed[0]
        events = [e for e in trace.events_of(path) if e.step <= first_step] or trace.events_of(path)
        culprit = events[-1] if events else None
        steps = sorted({e.step for e in trace.events_of(path)} | {first_step}) if events else [first_step]
        final = history[-1][2] if history else start
        if sha is None:
            what = "was deleted or made unreadable"
        else:
            what = "was changed"
        how = ""
        if culprit is not None:
            step = trace.step(culprit.step)
            command = step.command.text if step is not None and step.command is not None else None
            how = f" at step {culprit.step} ({culprit.how}{f': `{_short(command)}`' if command else ''})"
        restored = " and later restored" if final == start else ""
        evidence = {"file": path, "sha256_start": start, "sha256_after": sha, "sha256_end": final,
                    "seen_at": f"{label} after step {first_step}"}
        if culprit is not None:
            evidence["writer"] = culprit.how
            step = trace.step(culprit.step)
            if step is not None and step.command is not None:
                evidence["command"] = _short(step.command.text, 400)
        findings.append(Finding(
            kind=Kind.PROTECTED_FILES, severity=Severity.ERROR, steps=steps,
            message=f"the protected evaluation file {path} {what}{how}{restored}", evidence=evidence))
    return findings


def _short(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""Reuse: submitted files identical (same SHA-256) to files another run of the
task submitted, when this run did not compute them itself (copied in, typed in as
data, or present without being written).  Identical outputs of a program run in
both episodes, and identical code the agent typed, are reported as information."""

from __future__ import annotations

from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.policy import is_code
from rgym_integrity.trace import EpisodeTrace, Writer

#: Files this small are too common to mean anything when equal.
MIN_BYTES = 32


def check(trace: EpisodeTrace) -> list[Finding]:
    findings: list[Finding] = []
    for path, item in sorted(trace.artifacts.items()):
        sha = item.get("sha256")
        if not sha or (item.get("size") or 0) < MIN_BYTES or sha in trace.starter_hashes:
            continue
        others = [o for o in trace.other_artifacts.get(sha, []) if o.get("run_id") != trace.run_id]
        if not others:
            continue
        event = trace.last_event(path)
        if event is None and path in trace.initial:
            continue  # laid out by the task
        # a program the agent typed is its own work even when another run typed the same
        computed = event is not None and (event.writer == Writer.PROCESS
                                          or (event.writer == Writer.HAND and is_code(path)))
        other = others[0]
        where = f"{other.get('path')} of run {other.get('run_id')}"
        if computed:
            assert event is not None
            findings.append(Finding(
                kind=Kind.REUSE, severity=Severity.INFO, steps=[event.step],
                message=(f"{path} is identical to {where}, but this run "
                         f"{'computed' if event.writer == Writer.PROCESS else 'wrote'} it at step "
                         f"{event.step} ({event.how})"),
                evidence={"file": path, "sha256": sha, "size": item.get("size"), "same_as": others[:5]}))
            continue
        how = "it was not written during the episode" if event is None else \
            f"it was written at step {event.step} by {event.how}"
        findings.append(Finding(
            kind=Kind.REUSE, severity=Severity.ERROR, steps=[event.step] if event else [],
            message=f"the submitted {path} is identical to {where}, and {how}, not computed by this run",
            evidence={"file": path, "sha256": sha, "size": item.get("size"), "same_as": others[:5],
                      "writer": event.writer if event else None}))
    return findings

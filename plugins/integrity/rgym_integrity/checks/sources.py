"""Blocked sources: commands (curl, wget, git clone, pip install from a URL, code
that fetches) and tool calls (literature search, PDF reading) that reach a URL or
paper the task's leakage policy withholds.  Attempts count, whether or not the
network let them through."""

from __future__ import annotations

import re

from rgym_integrity.checks._common import script_texts
from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.shell import urls_in
from rgym_integrity.trace import EpisodeTrace

_ARXIV_ID = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")


def check(trace: EpisodeTrace) -> list[Finding]:
    policy = trace.policy.leakage
    if policy is None:
        return []
    from rgym_core import normalise_id, normalise_title

    findings: list[Finding] = []
    for step in trace.steps:
        texts = [step.text_of_action] + script_texts(trace, step)
        blocked: list[str] = []
        for text in texts:
            for url in urls_in(text):
                if policy.url_blocked(url) and url not in blocked:
                    blocked.append(url)
            for match in _ARXIV_ID.finditer(text):
                if normalise_id(match.group(1)) in policy.blocked_ids and match.group(0) not in blocked \
                        and not any(match.group(1) in b for b in blocked):
                    blocked.append(f"arXiv:{match.group(1)}")
        if step.tool != "bash":
            joined = " ".join(str(v) for v in step.args.values() if isinstance(v, str))
            title = normalise_title(joined) if joined else ""
            for blocked_title in policy.blocked_titles:
                if blocked_title and any(c.isalpha() for c in blocked_title) and title and (blocked_title in title or title in blocked_title) \
                        and len(title) >= 12:
                    blocked.append(f"title: {blocked_title}")
        if blocked:
            denied = bool(step.info.get("withheld")) or bool(re.search(
                r"blocked|withheld|leakage|(could not|unable to) resolve|network is unreachable|"
                r"name or service not known|connection refused|failed to connect|"
                r"temporary failure in name resolution", step.output or "", re.IGNORECASE))
            findings.append(Finding(
                kind=Kind.BLOCKED_SOURCE, severity=Severity.ERROR, steps=[step.index],
                message=(f"step {step.index} ({step.tool}) tried to reach a source the task withholds: "
                         f"{', '.join(blocked[:3])}{'; it did not get through' if denied else ''}"),
                evidence={"sources": blocked, "tool": step.tool, "denied": denied,
                          "action": " ".join(step.text_of_action.split())[:400],
                          "output": (step.output or "")[:300]}))
        elif step.info.get("withheld"):
            findings.append(Finding(
                kind=Kind.BLOCKED_SOURCE, severity=Severity.INFO, steps=[step.index],
                message=(f"a {step.tool} call at step {step.index} matched {step.info.get('withheld')} "
                         "withheld publication(s); they were not shown"),
                evidence={"tool": step.tool, "args": {k: v for k, v in step.args.items() if isinstance(v, str)},
                          "reasons": step.info.get("withheld_reasons")}))
    return findings

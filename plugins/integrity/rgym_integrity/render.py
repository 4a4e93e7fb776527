"""Findings for people: lines for ``rgym show RUN_DIR`` and ``rgym audit``, and the
``rgym show`` section (:func:`run_section`, returned by the ``rgym_run_sections`` hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_integrity.findings import IntegrityReport, ReportError, read_report, sort_findings


def verdict_line(report: IntegrityReport) -> str:
    counts = report.counts()
    if report.flagged:
        head = f"FLAGGED ({', '.join(report.kinds())})"
        if report.review:
            head += f", REVIEW ({', '.join(report.review_kinds())})"
    elif report.review:
        head = f"REVIEW ({', '.join(report.review_kinds())})"
    elif counts["warning"]:
        head = "warnings only"
    else:
        head = "clean"
    return (f"{head}: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)")


def finding_lines(report: IntegrityReport, *, evidence: bool = False, limit: int | None = None) -> list[str]:
    """One line per finding (errors first), optionally followed by its evidence."""
    lines: list[str] = []
    findings = sort_findings(report.findings)
    for finding in findings[:limit]:
        lines.append(finding.line())
        if evidence:
            for key, value in finding.evidence.items():
                if value in (None, "", [], {}):
                    continue
                text = value if isinstance(value, str) else repr(value)
                lines.append(f"          {key}: {text[:300]}")
    if limit is not None and len(findings) > limit:
        lines.append(f"... {len(findings) - limit} more in integrity.json")
    return lines


def report_lines(report: IntegrityReport, *, evidence: bool = False) -> list[str]:
    lines = [verdict_line(report), *finding_lines(report, evidence=evidence)]
    for limit in report.limits:
        lines.append(f"note: {limit}")
    if report.audit:
        lines.append(f"audit ({report.audit.get('model')}): {report.audit.get('verdict')} "
                     f"- {report.audit.get('summary', '')}".rstrip(" -"))
    return lines


def run_section(run_dir: Path) -> dict[str, Any] | None:
    """The "Integrity" section of ``rgym show RUN_DIR`` (``None``: the run has no report)."""
    try:
        report = read_report(run_dir)
    except ReportError as exc:
        return {"title": "Integrity", "lines": [f"error: {exc}"], "data": {"error": str(exc)}}
    if report is None:
        return None
    data = report.summary(limit=50)
    data["limits"] = list(report.limits)
    return {"title": "Integrity", "lines": report_lines(report), "data": data}


__all__ = ["finding_lines", "report_lines", "run_section", "verdict_line"]

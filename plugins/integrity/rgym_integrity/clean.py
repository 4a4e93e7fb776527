"""Whether runs got a clean integrity verdict: for tests that run an honest agent (a
task's own baseline) and require the monitor to leave it alone.

A run is clean when its ``integrity.json`` exists, is readable, and has no finding of
severity ``error`` or ``warning`` and none that puts it up for review (``info`` notes
are fine: they flag nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

from rgym_integrity.findings import REPORT_FILE


def integrity_problems(path: Path | str) -> list[str]:
    """Why the runs under ``path`` (one run directory, or a folder of them: every
    ``integrity.json`` below it) are not clean, one line each; ``[]`` when they are.
    No ``integrity.json`` at all is a problem too (the monitor did not run)."""
    root = Path(path)
    reports = sorted(root.rglob(REPORT_FILE)) if root.is_dir() else []
    if not reports:
        return [f"{root}: no {REPORT_FILE} (was the integrity monitor installed and enabled?)"]
    problems: list[str] = []
    for report in reports:
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{report}: unreadable ({exc})")
            continue
        for finding in data.get("findings") or []:
            severity, review = finding.get("severity"), bool(finding.get("review"))
            if severity in ("error", "warning") or review:
                label = f"{severity}, review" if review else str(severity)
                problems.append(f"{report}: {finding.get('kind')} ({label}): {finding.get('message')}")
        if data.get("review") and not any(f.get("review") for f in data.get("findings") or []):
            problems.append(f"{report}: up for review ({', '.join(data.get('review_kinds') or [])})")
    return problems


__all__ = ["integrity_problems"]

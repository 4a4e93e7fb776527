"""What the integrity monitor reports: findings, their kinds and severities, and
the ``integrity.json`` report of one run.

A :class:`Finding` names its :class:`Kind` (which check found it), a
:class:`Severity`, the step(s) it concerns (``0`` = the workspace as laid out,
before the agent's first action) and the evidence (files, hashes, commands,
excerpts).  A run is *flagged* when it has at least one finding of severity
``error``: ``rgym score`` shows flagged runs and ``--exclude-flagged`` leaves
them out.  ``warning`` findings deserve a look; ``info`` findings are context.
A finding marked ``review`` (a ``warning``: a score at its metric's ceiling, or
far beyond the task's reference) puts the run up *for review*: nothing proves
foul play, but a person must look before the score counts; ``rgym audit`` exits 1
for it, as for a flagged run.

Only the standard library and attrs are imported here: ``rgym score`` and
``rgym show`` read reports through this module.
"""

from __future__ import annotations

import enum
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

#: The report's file name inside a run directory.
REPORT_FILE = "integrity.json"
#: The key of the summary in ``result.json``'s ``extras``.
EXTRAS_KEY = "integrity"
#: The report format's version.
REPORT_VERSION = 1


class Kind(enum.StrEnum):
    """Which check a finding comes from."""

    PROTECTED_FILES = "protected_files"
    PROVENANCE = "provenance"
    NUMBERS_BEFORE_COMPUTATION = "numbers_before_computation"
    TEST_DATA_ACCESS = "test_data_access"
    BLOCKED_SOURCE = "blocked_source"
    IMPLAUSIBLE_SCORE = "implausible_score"
    REUSE = "reuse"
    SNAPSHOT = "snapshot"

    @property
    def label(self) -> str:
        """The kind as people say it: "numbers before computation"."""
        return _TITLES[self]

    @classmethod
    def parse(cls, text: str) -> Kind:
        """A kind from its value or title (``numbers before computation``, ``numbers``...)."""
        key = text.strip().lower().replace("-", "_").replace(" ", "_")
        for kind in cls:
            if key in (kind.value, kind.value.split("_")[0]):
                return kind
        raise ValueError(f"unknown finding kind {text!r}; kinds: {', '.join(k.value for k in cls)}")


_TITLES = {
    Kind.PROTECTED_FILES: "protected files",
    Kind.PROVENANCE: "provenance",
    Kind.NUMBERS_BEFORE_COMPUTATION: "numbers before computation",
    Kind.TEST_DATA_ACCESS: "test-data access",
    Kind.BLOCKED_SOURCE: "blocked source",
    Kind.IMPLAUSIBLE_SCORE: "implausible score",
    Kind.REUSE: "reuse",
    Kind.SNAPSHOT: "graded snapshot",
}


class Severity(enum.StrEnum):
    """How much a finding weighs: ``error`` flags the run."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@define
class Finding:
    """One thing a check found.

    ``steps``: the step indexes concerned (``0``: the workspace as laid out;
    the final workspace is the last step's).  ``evidence``: JSON-able facts
    (``file``, ``sha256_before``/``sha256_after``, ``command``, ``excerpt``,
    ``value``...), enough to check the finding by hand.  ``review``: the run is up
    for review until a person has looked (see the module docstring).
    """

    kind: Kind = field(converter=Kind)
    severity: Severity = field(converter=Severity)
    message: str
    steps: list[int] = field(factory=list)
    evidence: dict[str, Any] = field(factory=dict)
    review: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "title": self.kind.label, "severity": self.severity.value,
                "review": self.review, "message": self.message, "steps": list(self.steps),
                "evidence": dict(self.evidence)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(kind=data["kind"], severity=data["severity"], message=str(data.get("message", "")),
                   steps=[int(s) for s in data.get("steps") or []],
                   evidence=dict(data.get("evidence") or {}), review=bool(data.get("review", False)))

    def line(self) -> str:
        """One line for people: ``error  provenance  step 3: results.txt was written by echo``
        (``review`` in place of the severity for a finding that puts the run up for review)."""
        where = _steps_text(self.steps)
        label = "review" if self.review and self.severity is not Severity.ERROR else self.severity.value
        return f"{label:<7} {self.kind.label}{f' ({where})' if where else ''}: {self.message}"


def _steps_text(steps: Iterable[int]) -> str:
    steps = sorted(set(steps))
    if not steps:
        return ""
    shown = ", ".join(str(s) for s in steps[:6]) + (" ..." if len(steps) > 6 else "")
    return f"step{'s' if len(steps) > 1 else ''} {shown}"


def is_flagged(findings: Iterable[Finding]) -> bool:
    """True when any finding is an error."""
    return any(f.severity is Severity.ERROR for f in findings)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then findings for review, then by severity, first step and kind."""
    return sorted(findings, key=lambda f: (f.severity is not Severity.ERROR, not f.review, -f.severity.rank,
                                           min(f.steps, default=1 << 30), f.kind.value))


@define
class IntegrityReport:
    """The ``integrity.json`` of one run: findings plus what the monitor recorded
    to reach them (hashes of protected files, the files' writers step by step,
    hashes of the submitted artifacts), what it could not check (``limits``),
    its own cost, and the LLM audit when ``rgym audit`` ran."""

    run_id: str
    task: str
    findings: list[Finding] = field(factory=list)
    checks: list[str] = field(factory=list)
    protected: dict[str, Any] = field(factory=dict)
    files: list[dict[str, Any]] = field(factory=list)
    artifacts: dict[str, dict[str, Any]] = field(factory=dict)
    limits: list[str] = field(factory=list)
    cost: dict[str, Any] = field(factory=dict)
    audit: dict[str, Any] | None = None
    monitor: str = ""
    version: int = REPORT_VERSION

    @property
    def flagged(self) -> bool:
        return is_flagged(self.findings)

    @property
    def review(self) -> bool:
        """True when a finding puts the run up for review (see the module docstring)."""
        return any(f.review for f in self.findings)

    def review_kinds(self) -> list[str]:
        """The kinds of the findings that put the run up for review, in :class:`Kind` order."""
        found = {f.kind for f in self.findings if f.review}
        return [k.value for k in Kind if k in found]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def kinds(self, severity: Severity = Severity.ERROR) -> list[str]:
        """The kinds with a finding at ``severity`` or above, in :class:`Kind` order."""
        found = {f.kind for f in self.findings if f.severity.rank >= severity.rank}
        return [k.value for k in Kind if k in found]

    def summary(self, limit: int = 20) -> dict[str, Any]:
        """The compact summary written into ``result.json`` (``extras["integrity"]``)."""
        shown = sort_findings(self.findings)[:limit]
        out: dict[str, Any] = {
            "flagged": self.flagged, "counts": self.counts(), "kinds": self.kinds(),
            "review": self.review, "review_kinds": self.review_kinds(),
            "findings": [{"kind": f.kind.value, "severity": f.severity.value, "steps": f.steps,
                          "message": f.message, **({"review": True} if f.review else {})} for f in shown],
            "report": REPORT_FILE,
        }
        if len(self.findings) > limit:
            out["more"] = len(self.findings) - limit
        if self.audit:
            out["audit"] = {"verdict": self.audit.get("verdict"), "model": self.audit.get("model")}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version, "monitor": self.monitor, "run_id": self.run_id, "task": self.task,
            "flagged": self.flagged, "counts": self.counts(), "kinds": self.kinds(),
            "review": self.review, "review_kinds": self.review_kinds(),
            "findings": [f.to_dict() for f in sort_findings(self.findings)],
            "checks": list(self.checks), "limits": list(self.limits), "cost": dict(self.cost),
            "protected": self.protected, "files": self.files, "artifacts": self.artifacts,
            "audit": self.audit,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntegrityReport:
        return cls(run_id=str(data.get("run_id", "")), task=str(data.get("task", "")),
                   findings=[Finding.from_dict(f) for f in data.get("findings") or []],
                   checks=list(data.get("checks") or []), protected=dict(data.get("protected") or {}),
                   files=list(data.get("files") or []), artifacts=dict(data.get("artifacts") or {}),
                   limits=list(data.get("limits") or []), cost=dict(data.get("cost") or {}),
                   audit=data.get("audit"), monitor=str(data.get("monitor") or ""),
                   version=int(data.get("version", REPORT_VERSION)))


class ReportError(ValueError):
    """An ``integrity.json`` that cannot be read; the message names the file."""


def report_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / REPORT_FILE


def read_report(run_dir: Path | str) -> IntegrityReport | None:
    """The run's report, or ``None`` when it has none (the monitor did not run).
    Raises :class:`ReportError` for a file that is not a report."""
    path = report_path(run_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReportError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return IntegrityReport.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise ReportError(f"{path}: not an integrity report ({exc})") from None


def write_report(run_dir: Path | str, report: IntegrityReport) -> Path:
    """Write ``integrity.json`` atomically (a reader never sees half a report)."""
    path = report_path(run_dir)
    text = json.dumps(report.to_dict(), indent=2, default=str, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".integrity.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def summary_of_result(extras: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The integrity summary in a result's ``extras``, or ``None``."""
    if not extras:
        return None
    value = extras.get(EXTRAS_KEY)
    return value if isinstance(value, dict) else None


__all__ = ["EXTRAS_KEY", "REPORT_FILE", "REPORT_VERSION", "Finding", "IntegrityReport", "Kind",
           "ReportError", "Severity", "is_flagged", "read_report", "report_path", "sort_findings",
           "summary_of_result", "write_report"]

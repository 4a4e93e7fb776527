"""rgym-integrity: the integrity monitor of rgym.

Installed, it checks every episode (lifecycle hooks only; tasks need no change)
and writes ``integrity.json`` into the run directory and a summary into
``result.json`` (``extras["integrity"]``).  Turn it off with
``rgym --disable-plugin integrity run ...``, ``RGYM_INTEGRITY=off`` or, for a
task, ``integrity: {enabled: false}`` in its ``task.yaml``.  ``rgym audit
RUN_DIR --model provider/model`` adds an LLM's verdict.

Public API (imported on first use): :class:`~rgym_integrity.findings.Finding`,
:class:`~rgym_integrity.findings.Kind`, :class:`~rgym_integrity.findings.Severity`,
:class:`~rgym_integrity.findings.IntegrityReport`, :func:`~rgym_integrity.findings.read_report`,
:func:`~rgym_integrity.analyze.analyze_run_dir`, :func:`~rgym_integrity.render.finding_lines`,
:func:`~rgym_integrity.clean.integrity_problems` (for tests: why runs are not clean).
"""

from typing import TYPE_CHECKING

from rgym_core import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Finding": "rgym_integrity.findings",
    "IntegrityReport": "rgym_integrity.findings",
    "Kind": "rgym_integrity.findings",
    "Severity": "rgym_integrity.findings",
    "read_report": "rgym_integrity.findings",
    "write_report": "rgym_integrity.findings",
    "analyze_run_dir": "rgym_integrity.analyze",
    "finding_lines": "rgym_integrity.render",
    "integrity_problems": "rgym_integrity.clean",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["Finding", "IntegrityReport", "Kind", "Severity", "__version__", "analyze_run_dir",
           "finding_lines", "integrity_problems", "read_report", "write_report"]

if TYPE_CHECKING:
    from rgym_integrity.analyze import analyze_run_dir
    from rgym_integrity.clean import integrity_problems
    from rgym_integrity.findings import (
        Finding,
        IntegrityReport,
        Kind,
        Severity,
        read_report,
        write_report,
    )
    from rgym_integrity.render import finding_lines
